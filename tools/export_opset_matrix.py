#!/usr/bin/python3
"""Exports the recorded training models again the ways users export them:
every opset torch 1.13 writes (9 to 17), with and without constant folding,
with static shapes and with a dynamic batch axis, all in training mode.

`gpumem train` must predict the same step from each as from the recorded
export (opset 14, no folding, static): tests/train/test_export_matrix.cpp
checks it. BatchNormalization differs most: opsets 9 to 13 write five
outputs (Y, running mean and variance, saved mean and variance), 14 and
later three and a training_mode attribute.

    /usr/bin/python3 tools/export_opset_matrix.py   # writes tests/data/train/exports/*.onnx

Same seed and modules as tools/record_training.py; graph only (initializer
data erased), as its exports are. An export torch cannot write at an opset
is skipped and listed.
"""
import io
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "tests" / "data" / "train" / "exports"

# (recorded configuration, opset, constant folding, dynamic batch axis)
MATRIX = ([(m, opset, False, False) for m in ("resnet18_sgd", "mobilenet_v2_sgd", "transformer_adamw", "gpt_adam")
           for opset in range(9, 18)] +
          [(m, opset, True, dynamic) for m in ("resnet18_sgd", "mobilenet_v2_sgd", "transformer_adamw", "gpt_adam")
           for opset in (13, 17) for dynamic in (False, True)])


def main():
    sys.path.insert(0, str(HERE))
    import onnx
    import torch
    import record_training as rt
    from export_models import strip_to_graph_only, write_atomically

    OUT.mkdir(parents=True, exist_ok=True)
    skipped = []
    for name, opset, fold, dynamic in MATRIX:
        model, _, x, _, _ = rt.build(name)
        lm = rt.CONFIGS[name]["kind"] in ("transformer", "gpt")
        input_name = "tokens" if lm else "images"
        axes = {input_name: {1 if lm else 0: "batch"}, "logits": {0: "rows"}} if dynamic else None
        buf = io.BytesIO()
        try:
            torch.onnx.export(model, (x,), buf, opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=fold, input_names=[input_name], output_names=["logits"],
                              dynamic_axes=axes)
        except Exception as e:  # noqa: BLE001 (torch raises several kinds)
            skipped.append(f"{name} opset {opset}: {str(e).splitlines()[0][:100]}")
            continue
        proto = onnx.load_from_string(buf.getvalue())
        strip_to_graph_only(proto.graph)
        file = f"{name}.o{opset}.{'fold' if fold else 'nofold'}.{'dynamic' if dynamic else 'static'}.onnx"
        write_atomically(OUT / file, proto.SerializeToString())
        print(file)
    for s in skipped:
        print("skipped:", s)


if __name__ == "__main__":
    main()
