#!/usr/bin/env python3
"""Exports a model with dynamic axes, as docs/pytorch.md ("From PyTorch")
shows: each named dynamic axis becomes a symbolic dimension of the ONNX
graph, which `gpumem inspect --dim NAME=VALUE` binds.

The model is a small token MLP block (the feed-forward half of a transformer
layer) on input of shape [batch, seq, 256]. The file is written graph-only,
like the other bundled models: initializers keep their names, types and
dims, their data is erased (gpumem needs shapes, not weights), so the file
stays small.

Run with Debian's PyTorch:  /usr/bin/python3 examples/pytorch/export_dynamic_axes.py
It writes examples/models/token_mlp_dynamic.onnx.
"""
import io
import sys
from pathlib import Path

import onnx
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from export_models import strip_to_graph_only, write_atomically  # noqa: E402


class TokenMLP(nn.Module):
    def __init__(self, d_model: int = 256, d_ff: int = 1024):
        super().__init__()
        self.up = nn.Linear(d_model, d_ff)
        self.down = nn.Linear(d_ff, d_model)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.down(torch.nn.functional.gelu(self.up(x))))


def main() -> None:
    torch.manual_seed(0)
    model = TokenMLP().eval()
    example = torch.randn(2, 16, 256)
    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            model, (example,), buffer,
            opset_version=13,
            input_names=["hidden"],
            output_names=["out"],
            # Each named axis becomes a symbolic dimension: --dim batch=8,seq=512.
            dynamic_axes={"hidden": {0: "batch", 1: "seq"}, "out": {0: "batch", 1: "seq"}},
        )
    proto = onnx.load_model_from_string(buffer.getvalue())
    strip_to_graph_only(proto.graph)
    out = ROOT / "examples" / "models" / "token_mlp_dynamic.onnx"
    write_atomically(out, proto.SerializeToString())
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
