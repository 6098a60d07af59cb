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
same step). How each case was used (facts "half"): the SiLU and
Hardswish cases were recorded after their rule was written from the issue's
diagnosis; the UNet and the first GRU were recorded first and the
ConvTranspose, Resize, per-pixel loss and GRU rules written from them;
gru_wide (tuning) then fixed the GRU's backward; gru_bidirectional is the
test case: it was looked at after that fix (+6.94%), and the rule's
directions were then made to run one after the other as RNN.cpp runs them
(+1.36%). lstm_lm has no rule yet (oneDNN's workspace).
"""

import io
import json
import sys
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


class SmallUNet(nn.Module):
    """Down with a strided convolution, up with a transposed one and with
    nn.Upsample (ONNX Resize), a skip connection, per-pixel class scores."""

    def __init__(self, mode):
        super().__init__()
        self.enc1 = conv_block(3, 32, nn.ReLU)
        self.enc2 = conv_block(32, 64, nn.ReLU, 2)
        self.enc3 = conv_block(64, 128, nn.ReLU, 2)
        self.up3 = nn.ConvTranspose2d(128, 64, 2, stride=2)
        self.dec2 = conv_block(128, 64, nn.ReLU)
        self.up2 = nn.Upsample(scale_factor=2, mode=mode)
        self.dec1 = conv_block(96, 32, nn.ReLU)
        self.head = nn.Conv2d(32, 4, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        d2 = self.dec2(torch.cat([self.up3(self.enc3(e2)), e2], 1))
        return self.head(self.dec1(torch.cat([self.up2(d2), e1], 1)))


class RecurrentLM(nn.Module):
    def __init__(self, cell, hidden=256, layers=2, vocab=1000, bidirectional=False):
        super().__init__()
        self.embed = nn.Embedding(vocab, 128)
        self.rnn = cell(128, hidden, num_layers=layers, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(hidden * (2 if bidirectional else 1), vocab)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids))[0])


CASES = {
    # SiLU exports as Sigmoid then Mul at every opset.
    "silu_cnn_o14": dict(model=lambda: gated_cnn(nn.SiLU), opset=14, half="test"),
    # Hardswish: one HardSwish node from opset 14, HardSigmoid then Mul before.
    "hardswish_cnn_o13": dict(model=lambda: gated_cnn(nn.Hardswish), opset=13, half="test"),
    "hardswish_cnn_o14": dict(model=lambda: gated_cnn(nn.Hardswish), opset=14, half="test"),
    # ConvTranspose and Resize, and a per-pixel loss: classes on axis 1.
    "unet_nearest_o14": dict(model=lambda: SmallUNet("nearest"), opset=14, loss="pixels"),
    "unet_bilinear_o14": dict(model=lambda: SmallUNet("bilinear"), opset=14, loss="pixels"),
    # Recurrent layers: ONNX GRU and LSTM nodes.
    "gru_lm_o14": dict(model=lambda: RecurrentLM(nn.GRU), opset=14, loss="tokens"),
    "lstm_lm_o14": dict(model=lambda: RecurrentLM(nn.LSTM), opset=14, loss="tokens"),
    # Recorded after the GRU rule was written from gru_lm_o14, to check it on
    # shapes it was not made on: one wide layer over a small vocabulary (the
    # peak moves into the GRU's backward), and a bidirectional pair.
    "gru_wide_o14": dict(model=lambda: RecurrentLM(nn.GRU, hidden=512, layers=1, vocab=200), opset=14,
                         loss="tokens", vocab=200, tokens=128),
    "gru_bidirectional_o14": dict(model=lambda: RecurrentLM(nn.GRU, hidden=192, layers=2, vocab=300,
                                                            bidirectional=True), opset=14, loss="tokens",
                                  vocab=300, tokens=48, half="test"),
}
BATCH, SIZE = 8, 64


def example(case, rows):
    """The batch and the labels: images and classes, images and a class per
    pixel, or token ids and next tokens."""
    loss = case.get("loss", "classes")
    if loss == "tokens":
        ids = torch.randint(0, case.get("vocab", 1000), (rows, case.get("tokens", 64)))
        return ids, ids.clone()
    x = torch.randn(rows, 3, SIZE, SIZE)
    if loss == "pixels":
        return x, torch.randint(0, 4, (rows, SIZE, SIZE))
    return x, torch.randint(0, 10, (rows,))


def main():
    import onnx
    OUT.mkdir(parents=True, exist_ok=True)
    for name, case in CASES.items():
        torch.manual_seed(0)

        def make():
            model = record_torch2.with_cross_entropy(case["model"](), tokens=case.get("loss") == "tokens")
            x, y = example(case, BATCH)
            return model, {"input": x, "labels": y}, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        r = record_torch2.record_step(make)
        model = r["model"].model
        f = io.BytesIO()
        torch.onnx.export(model, (example(case, 1)[0],), f, opset_version=case["opset"],
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, dynamo=False,
                          input_names=["input"], output_names=["logits"], dynamic_axes={"input": {0: "batch"}})
        proto = onnx.load_from_string(f.getvalue())
        for init in proto.graph.initializer:  # graph only: the dims are what gpumem reads
            init.ClearField("raw_data")
            init.ClearField("float_data")
            init.data_location = onnx.TensorProto.DEFAULT
        (OUT / f"{name}.onnx").write_bytes(proto.SerializeToString())
        facts = {"case": name, "half": case.get("half", "tuning"), "torch": torch.__version__.split("+")[0],
                 "opset": case["opset"],
                 "ops": sorted({n.op_type for n in proto.graph.node}),
                 "recorded_peak_bytes": r["peak_total"], "resident_bytes": r["resident"],
                 "gpumem": ["--device", "cpu", "--optimizer", "sgd-momentum", "--batch", str(BATCH),
                            "--torch", torch.__version__.split("+")[0][:4]]}
        (OUT / f"{name}.facts.json").write_text(json.dumps(facts, indent=1) + "\n")
        print(name, r["peak_total"], facts["ops"])


if __name__ == "__main__":
    main()
