"""One-node ONNX graphs with dimensions at every integer edge, written as
protobuf by hand (Debian's python3 has no `onnx` package), each with the
output shape ONNX's rules give, computed here with Python's unbounded
integers: the sweep's oracle for 32- and 64-bit wraparound in shape
inference (a wrapped size is a wrong answer that exits 0).

Field numbers are onnx.proto's (onnx/onnx.proto, IR version 8)."""

import math
import struct

FLOAT, INT64 = 1, 7
ELEMENT_BYTES = {FLOAT: 4, INT64: 8}


def _varint(n):
    n &= (1 << 64) - 1  # int64 fields: negatives as ten-byte two's complement
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _int(field, n):
    return _varint(field << 3) + _varint(n)


def _bytes(field, data):
    if isinstance(data, str):
        data = data.encode()
    return _varint((field << 3) | 2) + _varint(len(data)) + data


def _dim(d):
    return _bytes(1, _int(1, d) if isinstance(d, int) else _bytes(2, d))


def value_info(name, shape, elem=FLOAT):
    tensor_type = _int(1, elem) + _bytes(2, b"".join(_dim(d) for d in shape))
    return _bytes(1, name) + _bytes(2, _bytes(1, tensor_type))


def int64_tensor(name, values):
    dims = _int(1, len(values))
    return dims + _int(2, INT64) + _bytes(8, name) + _bytes(9, struct.pack(f"<{len(values)}q", *values))


def attribute_int(name, value):
    return _bytes(1, name) + _int(3, value) + _int(20, 2)


def attribute_ints(name, values):
    return _bytes(1, name) + b"".join(_int(8, v) for v in values) + _int(20, 7)


def model(op, inputs, output, attributes=(), initializers=(), opset=17, output_shape=None):
    """inputs: [(name, shape)]; initializers: [(name, int64 values)] (also node inputs)."""
    node = b"".join(_bytes(1, n) for n, _ in inputs) + b"".join(_bytes(1, n) for n, _ in initializers)
    node += _bytes(2, output) + _bytes(3, op.lower()) + _bytes(4, op) + b"".join(_bytes(5, a) for a in attributes)
    graph = _bytes(1, node) + _bytes(2, "crafted")
    graph += b"".join(_bytes(5, int64_tensor(n, v)) for n, v in initializers)
    graph += b"".join(_bytes(11, value_info(n, s)) for n, s in inputs)
    graph += _bytes(12, value_info(output, output_shape) if output_shape is not None else _bytes(1, output))
    return _int(1, 8) + _bytes(2, "gpumem-hostile") + _bytes(7, graph) + _bytes(8, _int(2, opset))


# Dimensions at the edges (3 first: the control, where every shape is small and
# the oracle must agree with gpumem exactly): 2^30 (four of them sum past
# int32), 2^31 - 1 and 2^31 (int32), 2^32 and 2^32 + 1 (uint32), 2^40 and 2^50
# (whose products with the other small axes stay under gpumem's 1 EiB limit,
# so the right answer is a number, not an error).
EDGES = [3, 1 << 30, (1 << 31) - 1, 1 << 31, 1 << 32, (1 << 32) + 1, 1 << 40, 1 << 50]


def crafted_models():
    """Yields (name, bytes, output name, expected output shape)."""
    for d in EDGES:
        tag = f"d{d}"
        yield (f"concat4_{tag}", model("Concat", [(f"x{i}", [1, d]) for i in range(4)], "y", [attribute_int("axis", 1)]),
               "y", [1, 4 * d])
        yield (f"concat4_axis0_{tag}", model("Concat", [(f"x{i}", [d, 2]) for i in range(4)], "y",
                                             [attribute_int("axis", 0)]), "y", [4 * d, 2])
        yield (f"add_broadcast_{tag}", model("Add", [("a", [d, 1]), ("b", [1, 4])], "y"), "y", [d, 4])
        yield (f"matmul_{tag}", model("MatMul", [("a", [d, 3]), ("b", [3, 4])], "y"), "y", [d, 4])
        yield (f"matmul_batched_{tag}", model("MatMul", [("a", [d, 2, 3]), ("b", [3, 4])], "y"), "y", [d, 2, 4])
        yield (f"gemm_{tag}", model("Gemm", [("a", [d, 3]), ("b", [3, 4])], "y"), "y", [d, 4])
        yield (f"expand_{tag}", model("Expand", [("a", [1, 1])], "y", initializers=[("shape", [d, 4])]), "y", [d, 4])
        yield (f"tile_{tag}", model("Tile", [("a", [1, 2])], "y", initializers=[("repeats", [d, 2])]), "y", [d, 4])
        yield (f"pad_{tag}", model("Pad", [("a", [2, 2])], "y", initializers=[("pads", [d, 0, d, 0])]), "y",
               [2 + 2 * d, 2])
        yield (f"reshape_{tag}", model("Reshape", [("a", [d, 4])], "y", initializers=[("shape", [-1, 2])]), "y",
               [2 * d, 2])
        yield (f"flatten_{tag}", model("Flatten", [("a", [2, d, 4])], "y", [attribute_int("axis", 1)]), "y",
               [2, 4 * d])
        yield (f"constant_of_shape_{tag}", model("ConstantOfShape", [], "y", initializers=[("shape", [d, 4])]), "y",
               [d, 4])
        yield (f"transpose_{tag}", model("Transpose", [("a", [d, 3, 1])], "y", [attribute_ints("perm", [2, 0, 1])]),
               "y", [1, d, 3])
        yield (f"unsqueeze_{tag}", model("Unsqueeze", [("a", [d, 4])], "y", initializers=[("axes", [0])]), "y",
               [1, d, 4])
        yield (f"conv_{tag}", model("Conv", [("x", [1, 1, d, 1]), ("w", [8, 1, 1, 1])], "y"), "y", [1, 8, d, 1])
        yield (f"reduce_{tag}", model("ReduceSum", [("a", [d, 4, 4])], "y", [attribute_int("keepdims", 1)],
                                      initializers=[("axes", [2])]), "y", [d, 4, 1])
        yield (f"slice_{tag}", model("Slice", [("a", [d, 4])], "y",
                                     initializers=[("starts", [1]), ("ends", [(1 << 63) - 1]), ("axes", [0])]),
               "y", [d - 1, 4])
        yield (f"gather_{tag}", model("Gather", [("a", [d, 4]), ("i", [3, 5])], "y"), "y", [3, 5, 4])
        yield (f"softmax_{tag}", model("Softmax", [("a", [4, d])], "y"), "y", [4, d])
    # Shapes declared by the file itself: negative, zero, and a product past int64.
    for name, shape in [("negative_dim", [-5, 3]), ("zero_dim", [0, 1 << 62]), ("int64_product", [1 << 40, 1 << 40]),
                        ("int64_max_dim", [(1 << 63) - 1, 2])]:
        yield (f"relu_{name}", model("Relu", [("a", shape)], "y"), "y", shape if min(shape) >= 0 else None)


def elements(shape):
    return math.prod(shape)


def bytes_of(shape, elem=FLOAT):
    return elements(shape) * ELEMENT_BYTES[elem]
