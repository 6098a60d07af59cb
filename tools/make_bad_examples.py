#!/usr/bin/python3
"""Writes examples/bad/: inputs the error examples of docs/inspect.md run on.

Run with Debian's interpreter (python3-onnx): /usr/bin/python3 tools/make_bad_examples.py
"""
import pathlib

import onnx
from onnx import TensorProto, helper

root = pathlib.Path(__file__).resolve().parent.parent
bad = root / "examples" / "bad"
bad.mkdir(parents=True, exist_ok=True)

# A real model cut short: what an interrupted download leaves.
model = (root / "examples" / "models" / "mobilenet_v2.onnx").read_bytes()
(bad / "truncated.onnx").write_bytes(model[:4096])

# Two nodes in the wrong order: 'second' reads 'y' before 'first' makes it.
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
z = helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 8])
second = helper.make_node("Relu", ["y"], ["z"], name="second")
first = helper.make_node("Neg", ["x"], ["y"], name="first")
graph = helper.make_graph([second, first], "unsorted", [x], [z])
unsorted = helper.make_model(graph, producer_name="gpumem examples", opset_imports=[helper.make_opsetid("", 13)])
unsorted.ir_version = 7
(bad / "unsorted.onnx").write_bytes(unsorted.SerializeToString())
