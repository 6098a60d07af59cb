#!/usr/bin/python3
"""Exports the two sequence-first language models of tools/record_training.py
(TinyLM as in transformer_adamw, TinyGPT as in gpt_adam) with a dynamic batch
axis, so that `gpumem train --batch N` can change their batch.

Their recorded graphs are static exports ([seq, batch] = [128, 8] and
[96, 6]): the batch is baked into the attention's reshapes there, so no
other batch can be bound. These exports name the batch axis of `tokens`
("batch", the axis PyTorch users pass in dynamic_axes); the sequence stays
fixed, as the learned positions fix it. Same seed, same modules, same
export settings otherwise (opset 14, training mode, no constant folding,
graph only).

    /usr/bin/python3 tools/export_dynamic_lms.py   # writes tests/data/train/*_dynamic.onnx
"""
import io
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "tests" / "data" / "train"


def main():
    sys.path.insert(0, str(HERE))
    import onnx
    import torch
    import record_training as rt
    from export_models import strip_to_graph_only, write_atomically

    for name, cls, seq, batch, vocab in [("transformer_adamw_dynamic", rt.tiny_lm_class(), 128, 8, 1000),
                                         ("gpt_adam_dynamic", rt.tiny_gpt_class(), 96, 6, 2000)]:
        torch.manual_seed(0)
        model = cls()
        model.train()
        tokens = torch.randint(0, vocab, (seq, batch))
        buf = io.BytesIO()
        torch.onnx.export(model, (tokens,), buf, opset_version=14, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["tokens"], output_names=["logits"],
                          dynamic_axes={"tokens": {1: "batch"}, "logits": {0: "rows"}})
        proto = onnx.load_from_string(buf.getvalue())
        onnx.checker.check_model(proto)
        strip_to_graph_only(proto.graph)
        write_atomically(OUT / f"{name}.onnx", proto.SerializeToString())
        print(f"{name}.onnx: tokens {[d.dim_param or d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]}")


if __name__ == "__main__":
    main()
