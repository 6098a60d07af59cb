#!/usr/bin/env python3
"""Records, with torch 2.x on the CPU, training steps of small modules whose
ONNX export takes apart what PyTorch runs as one kernel, and exports each in
training mode: ground truth for `gpumem train`'s ONNX rules (issue 47).

    $(scripts/torch-venv.sh 2.10.0) tools/record_onnx_rules.py     # needs `pip install onnx` in the venv

torch 2.10 still has the TorchScript exporter (dynamo=False) that writes the
training-mode graphs `gpumem train` reads. Each case writes, under
tests/data/onnx_rules/: CASE.onnx (graph only: initializer data erased,
dims kept) and CASE.facts.json (the recorded peak, by
tools/record_torch2.py's record_step, and the `gpumem train` flags of the
same step). These cases were recorded after the rules they check were
written from the issue's diagnosis; none was tuned on.
"""

import io
import json
import sys
import types
from pathlib import Path

import torch
import torch.nn as nn

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "onnx_rules"
sys.path.insert(0, str(ROOT / "tools"))
import record_torch2  # noqa: E402


def conv_block(c_in, c_out, act, stride=1):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out), act())


class SqueezeExcite(nn.Module):
    """efficientnet's squeeze-excitation: a Sigmoid whose output scales the input
    (not x * sigmoid(x): it must stay as it is)."""

    def __init__(self, c, act):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.reduce = nn.Conv2d(c, c // 4, 1)
        self.act = act()
        self.expand = nn.Conv2d(c // 4, c, 1)

    def forward(self, x):
        return x * torch.sigmoid(self.expand(self.act(self.reduce(self.pool(x)))))


def gated_cnn(act):
    return nn.Sequential(conv_block(3, 32, act), conv_block(32, 64, act, 2), SqueezeExcite(64, act),
                         conv_block(64, 64, act), conv_block(64, 128, act, 2), SqueezeExcite(128, act),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))


CASES = {
    # SiLU exports as Sigmoid then Mul at every opset.
    "silu_cnn_o14": dict(model=lambda: gated_cnn(nn.SiLU), opset=14),
    # Hardswish: one HardSwish node from opset 14, HardSigmoid then Mul before.
    "hardswish_cnn_o13": dict(model=lambda: gated_cnn(nn.Hardswish), opset=13),
    "hardswish_cnn_o14": dict(model=lambda: gated_cnn(nn.Hardswish), opset=14),
}
BATCH, SIZE = 8, 64


class WithLoss(nn.Module):
    """The step as `loss = cross_entropy(model(x), y)`: the logits die in the loss."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input, labels):
        return types.SimpleNamespace(loss=nn.functional.cross_entropy(self.model(input), labels))


def main():
    import onnx
    OUT.mkdir(parents=True, exist_ok=True)
    for name, case in CASES.items():
        torch.manual_seed(0)

        def make():
            model = WithLoss(case["model"]())
            batch = {"input": torch.randn(BATCH, 3, SIZE, SIZE), "labels": torch.randint(0, 10, (BATCH,))}
            return model, batch, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        r = record_torch2.record_step(make)
        model = r["model"].model
        f = io.BytesIO()
        torch.onnx.export(model, (torch.randn(1, 3, SIZE, SIZE),), f, opset_version=case["opset"],
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, dynamo=False,
                          input_names=["input"], output_names=["logits"], dynamic_axes={"input": {0: "batch"}})
        proto = onnx.load_from_string(f.getvalue())
        for init in proto.graph.initializer:  # graph only: the dims are what gpumem reads
            init.ClearField("raw_data")
            init.ClearField("float_data")
            init.data_location = onnx.TensorProto.DEFAULT
        (OUT / f"{name}.onnx").write_bytes(proto.SerializeToString())
        facts = {"case": name, "torch": torch.__version__.split("+")[0], "opset": case["opset"],
                 "ops": sorted({n.op_type for n in proto.graph.node}),
                 "recorded_peak_bytes": r["peak_total"], "resident_bytes": r["resident"],
                 "gpumem": ["--device", "cpu", "--optimizer", "sgd-momentum", "--batch", str(BATCH),
                            "--torch", torch.__version__.split("+")[0][:4]]}
        (OUT / f"{name}.facts.json").write_text(json.dumps(facts, indent=1) + "\n")
        print(name, r["peak_total"], facts["ops"])


if __name__ == "__main__":
    main()
