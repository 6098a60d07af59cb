#!/usr/bin/python3
"""Writes the seed corpus of fuzz_onnx_loader: tiny ONNX models that reach
every part of the loader (shape arithmetic folding, subgraphs, initializers in
their several storage forms, old and new opsets, odd types), plus a few
damaged ones. Needs onnx (1.12). Run from anywhere:

    /usr/bin/python3 fuzz/make_seeds.py [OUT_DIR]

OUT_DIR defaults to fuzz/corpus/onnx_loader next to this script. It also
writes regress_* files: the smallest input found for each bug fuzzing turned
up, so that the corpus replay keeps them fixed. The inputs the fuzzer itself
added (a set-cover merge of its grown corpus, named by content hash) sit in
the same folder; rerunning this script rewrites only seed_* and regress_*.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

H = helper
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus",
                                                         "onnx_loader")


def i64(name, values, dims=None):
    arr = np.array(values, dtype=np.int64)
    if dims is not None:
        arr = arr.reshape(dims)
    return numpy_helper.from_array(arr, name)


def dims_only(name, dtype, dims):
    t = TensorProto()
    t.name, t.data_type = name, dtype
    t.dims.extend(dims)
    return t


def model(graph, opset=13, ir=8, domains=()):
    imports = [H.make_opsetid("", opset)] + [H.make_opsetid(d, 1) for d in domains]
    m = H.make_model(graph, opset_imports=imports, producer_name="gpumem-fuzz-seed")
    m.ir_version = ir
    return m


def save(name, m):
    data = m.SerializeToString() if hasattr(m, "SerializeToString") else m
    assert len(data) < 4096, (name, len(data))
    with open(os.path.join(OUT, "seed_" + name), "wb") as f:
        f.write(data)


def shape_chain():
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as PyTorch exports it.
    nodes = [
        H.make_node("Shape", ["x"], ["s"]),
        H.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        H.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
        H.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        H.make_node("Reshape", ["x", "target"], ["flat"]),
        H.make_node("MatMul", ["flat", "w"], ["y"]),
        H.make_node("Relu", ["y"], ["out"]),
    ]
    g = H.make_graph(
        nodes, "shape_chain",
        [H.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 4])],
        [H.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [i64("zero", 0, []), i64("axes0", [0]), i64("minus1", [-1]),
         numpy_helper.from_array(np.ones((12, 5), np.float32), "w")])
    return model(g)


def shape_arith():
    # Every op the folder knows, fed from Shape so inference needs the folder.
    nodes = [
        H.make_node("Shape", ["x"], ["s"]),
        H.make_node("Shape", ["x"], ["s_tail"], start=1, end=-1),
        H.make_node("Size", ["x"], ["size"]),
        H.make_node("Slice", ["s", "st", "en", "ax", "stp"], ["hw"]),
        H.make_node("ReduceProd", ["hw"], ["hw_prod"], keepdims=1),
        H.make_node("Mul", ["hw_prod", "two"], ["m2"]),
        H.make_node("Div", ["m2", "two"], ["d2"]),
        H.make_node("Sub", ["d2", "one"], ["s1"]),
        H.make_node("Add", ["s1", "one"], ["a1"]),
        H.make_node("Mod", ["a1", "three"], ["md"], fmod=0),
        H.make_node("Max", ["md", "one", "two"], ["mx"]),
        H.make_node("Min", ["mx", "three"], ["mn"]),
        H.make_node("Pow", ["mn", "two"], ["pw"]),
        H.make_node("Cast", ["pw"], ["pwf"], to=TensorProto.FLOAT),
        H.make_node("Sqrt", ["pwf"], ["sq"]),
        H.make_node("Ceil", ["sq"], ["ce"]),
        H.make_node("Floor", ["ce"], ["fl"]),
        H.make_node("Neg", ["fl"], ["ng"]),
        H.make_node("Abs", ["ng"], ["ab"]),
        H.make_node("Cast", ["ab"], ["abi"], to=TensorProto.INT64),
        H.make_node("Range", ["zero", "abi_s", "one_s"], ["rg"]),
        H.make_node("Squeeze", ["abi", "axes0"], ["abi_s"]),
        H.make_node("Equal", ["rg", "zero"], ["eq"]),
        H.make_node("Not", ["eq"], ["neq"]),
        H.make_node("Where", ["neq", "rg", "minus1"], ["wh"]),
        H.make_node("ConstantOfShape", ["hw"], ["cos"], value=H.make_tensor("v", TensorProto.INT64, [1], [7])),
        H.make_node("Expand", ["one", "hw"], ["ex"]),
        H.make_node("Transpose", ["ex"], ["tr"], perm=[1, 0]),
        H.make_node("ReduceSum", ["tr", "axes0"], ["rs"], keepdims=0),
        H.make_node("Less", ["rs", "three"], ["lt"]),
        H.make_node("Greater", ["rs", "one"], ["gt"]),
        H.make_node("And", ["lt", "gt"], ["an"]),
        H.make_node("Or", ["lt", "an"], ["orr"]),
        H.make_node("Xor", ["orr", "an"], ["xo"]),
        H.make_node("Sign", ["minus1"], ["sg"]),
        H.make_node("Identity", ["sg"], ["idn"]),
        H.make_node("Concat", ["idn", "s_tail", "size"], ["cat"], axis=0),
        H.make_node("ReduceMax", ["cat"], ["rmax"], keepdims=0),
        H.make_node("Reshape", ["x", "hw_target"], ["r"]),
        H.make_node("Concat", ["minus1", "hw_prod"], ["hw_target"], axis=0),
        H.make_node("ConstantOfShape", ["cat"], ["zeros"]),
        H.make_node("Expand", ["x", "s"], ["xe"]),
    ]
    # Range and Reshape read values defined after them: put nodes in order.
    order = ["s", "s_tail", "size", "hw", "hw_prod", "m2", "d2", "s1", "a1", "md", "mx", "mn", "pw", "pwf", "sq",
             "ce", "fl", "ng", "ab", "abi", "abi_s", "rg", "eq", "neq", "wh", "cos", "ex", "tr", "rs", "lt", "gt",
             "an", "orr", "xo", "sg", "idn", "cat", "rmax", "hw_target", "r", "zeros", "xe"]
    by_out = {n.output[0]: n for n in nodes}
    g = H.make_graph(
        [by_out[o] for o in order], "shape_arith",
        [H.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
        [H.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in ("r", "wh", "cos", "xo", "rmax", "zeros",
                                                                             "xe")],
        [i64("zero", 0, []), i64("one", [1]), i64("one_s", 1, []), i64("two", [2]), i64("three", [3]),
         i64("minus1", [-1]), i64("axes0", [0]), i64("st", [2]), i64("en", [4]), i64("ax", [0]), i64("stp", [1])])
    return model(g, opset=18)


def old_opset():
    # Opset 9: Unsqueeze/Squeeze/Slice take attributes; IR 3 lists
    # initializers among the inputs.
    nodes = [
        H.make_node("Shape", ["x"], ["s"]),
        H.make_node("Slice", ["s"], ["s01"], starts=[0], ends=[2], axes=[0]),
        H.make_node("Gather", ["s", "idx"], ["last"]),
        H.make_node("Unsqueeze", ["last"], ["last1"], axes=[0]),
        H.make_node("Squeeze", ["last1"], ["last0"], axes=[0]),
        H.make_node("Unsqueeze", ["last0"], ["last2"], axes=[0]),
        H.make_node("Concat", ["s01", "last2"], ["shape"], axis=0),
        H.make_node("Reshape", ["x", "shape"], ["y"]),
        H.make_node("Conv", ["y", "w"], ["c"], kernel_shape=[1, 1]),
        H.make_node("ReduceSum", ["c"], ["rs"], axes=[1], keepdims=1),
    ]
    g = H.make_graph(
        nodes, "old_opset",
        [H.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 3]),
         H.make_tensor_value_info("w", TensorProto.FLOAT, [4, 2, 1, 1]),
         H.make_tensor_value_info("idx", TensorProto.INT64, [])],
        [H.make_tensor_value_info("rs", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.zeros((4, 2, 1, 1), np.float32), "w"), i64("idx", -1, [])])
    return model(g, opset=9, ir=3)


def if_branches():
    then_g = H.make_graph(
        [H.make_node("Add", ["x", "bias"], ["t"]), H.make_node("Shape", ["t"], ["ts"])], "then",
        [], [H.make_tensor_value_info("t", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((4,), np.float32), "bias")])
    else_g = H.make_graph(
        [H.make_node("Concat", ["x", "x"], ["e"], axis=1)], "else",
        [], [H.make_tensor_value_info("e", TensorProto.FLOAT, ["n", 8])])
    nodes = [
        H.make_node("ReduceSum", ["x"], ["sum"], keepdims=0),
        H.make_node("Greater", ["sum", "zero"], ["cond"]),
        H.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g),
    ]
    g = H.make_graph(
        nodes, "if_branches",
        [H.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [H.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(0, np.float32), "zero")])
    return model(g)


def loop_nested():
    # A Loop whose body holds an If: subgraphs two deep, reading outer values.
    inner_then = H.make_graph([H.make_node("Mul", ["acc", "w"], ["m"])], "inner_then", [],
                              [H.make_tensor_value_info("m", TensorProto.FLOAT, [2])])
    inner_else = H.make_graph([H.make_node("Identity", ["acc"], ["m2"])], "inner_else", [],
                              [H.make_tensor_value_info("m2", TensorProto.FLOAT, [2])])
    body = H.make_graph(
        [H.make_node("Less", ["i", "five"], ["c_out"]),
         H.make_node("If", ["cond_in"], ["next"], then_branch=inner_then, else_branch=inner_else),
         H.make_node("Unsqueeze", ["i", "axes0"], ["scan_out"])],
        "body",
        [H.make_tensor_value_info("i", TensorProto.INT64, []),
         H.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         H.make_tensor_value_info("acc", TensorProto.FLOAT, [2])],
        [H.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         H.make_tensor_value_info("next", TensorProto.FLOAT, [2]),
         H.make_tensor_value_info("scan_out", TensorProto.INT64, [1])])
    nodes = [H.make_node("Loop", ["trip", "cond", "init"], ["final", "scans"], body=body)]
    g = H.make_graph(
        nodes, "loop_nested",
        [H.make_tensor_value_info("init", TensorProto.FLOAT, [2])],
        [H.make_tensor_value_info("final", TensorProto.FLOAT, [2]),
         H.make_tensor_value_info("scans", TensorProto.INT64, None)],
        [i64("trip", 10, []), numpy_helper.from_array(np.array(True), "cond"),
         numpy_helper.from_array(np.full((2,), 2, np.float32), "w"), i64("five", 5, []), i64("axes0", [0])])
    return model(g)


def scan():
    body = H.make_graph(
        [H.make_node("Add", ["s_in", "x_t"], ["s_out"]), H.make_node("Identity", ["s_out"], ["y_t"])], "scan_body",
        [H.make_tensor_value_info("s_in", TensorProto.FLOAT, [3]),
         H.make_tensor_value_info("x_t", TensorProto.FLOAT, [3])],
        [H.make_tensor_value_info("s_out", TensorProto.FLOAT, [3]),
         H.make_tensor_value_info("y_t", TensorProto.FLOAT, [3])])
    g = H.make_graph(
        [H.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=body, num_scan_inputs=1)], "scan",
        [H.make_tensor_value_info("s0", TensorProto.FLOAT, [3]),
         H.make_tensor_value_info("xs", TensorProto.FLOAT, ["T", 3])],
        [H.make_tensor_value_info("s", TensorProto.FLOAT, None),
         H.make_tensor_value_info("ys", TensorProto.FLOAT, None)])
    return model(g)


def constants_and_graph_only():
    # Constant nodes in every attribute form; initializers with raw, typed,
    # absent (graph-only) and external data; a sparse initializer.
    raw = numpy_helper.from_array(np.arange(6, dtype=np.float16).reshape(2, 3), "raw16")
    typed = H.make_tensor("typed", TensorProto.INT32, [3], [1, 2, 3])
    graph_only = dims_only("big_weight", TensorProto.FLOAT, [4096, 4096])
    external = dims_only("ext", TensorProto.FLOAT, [1024, 1024])
    external.data_location = TensorProto.EXTERNAL
    kv = external.external_data.add()
    kv.key, kv.value = "location", "weights.bin"
    bf16 = H.make_tensor("bf", TensorProto.BFLOAT16, [2], [16256, 16384])
    u4 = H.make_tensor("u4", TensorProto.UINT8, [3], [1, 2, 3])
    sparse = H.make_sparse_tensor(H.make_tensor("sp", TensorProto.FLOAT, [2], [1.0, 2.0]),
                                  H.make_tensor("sp_idx", TensorProto.INT64, [2], [0, 5]), [2, 4])
    nodes = [
        H.make_node("Constant", [], ["c_t"], value=i64("c_t", [2, -1])),
        H.make_node("Constant", [], ["c_f"], value_float=1.5),
        H.make_node("Constant", [], ["c_i"], value_int=3),
        H.make_node("Constant", [], ["c_fs"], value_floats=[1.0, 2.0]),
        H.make_node("Constant", [], ["c_is"], value_ints=[4, 4]),
        H.make_node("Constant", [], ["c_s"], value_string="hi"),
        H.make_node("Constant", [], ["c_ss"], value_strings=["a", "b"]),
        H.make_node("Constant", [], ["c_sp"], sparse_value=H.make_sparse_tensor(
            H.make_tensor("v", TensorProto.FLOAT, [1], [3.0]), H.make_tensor("i", TensorProto.INT64, [1], [1]), [3])),
        H.make_node("Transpose", ["big_weight"], ["big_t"]),
        H.make_node("Gemm", ["x", "big_t"], ["y"]),
        H.make_node("Reshape", ["raw16", "c_t"], ["r16"]),
        H.make_node("Cast", ["typed"], ["tf"], to=TensorProto.FLOAT16),
        H.make_node("Expand", ["c_f", "c_is"], ["e"]),
        H.make_node("MatMul", ["y", "ext"], ["z"]),
    ]
    g = H.make_graph(
        nodes, "constants",
        [H.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4096])],
        [H.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in ("z", "r16", "tf", "e", "c_s", "c_ss",
                                                                            "c_sp", "c_fs", "c_i", "bf", "u4")],
        [raw, typed, graph_only, external, bf16, u4])
    g.sparse_initializer.append(sparse)
    return model(g)


def odd_types():
    # Sequences, optionals, maps in value types; int4, float8, string and
    # complex tensors; a custom-domain op with no schema; multi-output Split.
    seq = H.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, [2, 2])
    opt = H.make_value_info("opt", H.make_optional_type_proto(H.make_tensor_type_proto(TensorProto.INT64, [1])))
    nodes = [
        H.make_node("Split", ["x"], ["a", "b"], axis=1),
        H.make_node("SequenceAt", ["seq", "zero"], ["s0"]),
        H.make_node("MyOp", ["a", "b"], ["custom"], domain="com.example"),
        H.make_node("OptionalHasElement", ["opt"], ["has"]),
        H.make_node("Cast", ["b"], ["b8"], to=TensorProto.FLOAT8E4M3FN if hasattr(TensorProto, "FLOAT8E4M3FN")
                    else 17),
        H.make_node("Identity", ["c64"], ["c64o"]),
        H.make_node("Identity", ["strs"], ["strs_o"]),
    ]
    g = H.make_graph(
        nodes, "odd_types",
        [H.make_tensor_value_info("x", TensorProto.FLOAT, [2, "w"]), seq, opt,
         H.make_tensor_value_info("c64", TensorProto.COMPLEX64, [2]),
         H.make_tensor_value_info("strs", TensorProto.STRING, [3])],
        [H.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in ("custom", "s0", "has", "b8", "c64o",
                                                                            "strs_o")],
        [i64("zero", 0, [])],
        value_info=[H.make_tensor_value_info("b8", 17, [2, None]),
                    H.make_tensor_value_info("a", TensorProto.FLOAT, [2, "half_w"])])
    m = model(g, opset=15, ir=8, domains=("com.example",))
    return m


def int4_and_negative():
    # Packed 4-bit initializer with an odd count; a value_info with a
    # negative dim (must be rejected with InputError).
    q = dims_only("q", 22, [3])
    q.int32_data.extend([0x21, 0x03])
    g = H.make_graph(
        [H.make_node("Identity", ["q"], ["qo"]), H.make_node("Relu", ["x"], ["y"])], "int4",
        [H.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [H.make_tensor_value_info("qo", 22, None), H.make_tensor_value_info("y", TensorProto.FLOAT, [1, -8])],
        [q])
    return model(g)


def big_fold_limits():
    # Shape arithmetic at the folding size limit and beyond it: the folder must
    # decline, never allocate.
    nodes = [
        H.make_node("Range", ["zero", "big", "one"], ["r"]),
        H.make_node("ConstantOfShape", ["huge_shape"], ["cos"]),
        H.make_node("Expand", ["one", "huge_shape"], ["ex"]),
        H.make_node("Range", ["zero", "limit", "one"], ["r_ok"]),
        H.make_node("Reshape", ["r_ok", "sq"], ["r2"]),
        H.make_node("Tile", ["r2", "reps"], ["tiled"]),
    ]
    g = H.make_graph(
        nodes, "big_fold",
        [],
        [H.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in ("r", "cos", "ex", "tiled")],
        [i64("zero", 0, []), i64("one", 1, []), i64("big", 1 << 40, []), i64("limit", 65536, []),
         i64("huge_shape", [1 << 20, 1 << 20]), i64("sq", [256, 256]), i64("reps", [1 << 15, 1 << 15])])
    return model(g)


# ---------------------------------------------------------------------------
# Regression inputs: each reproduced a crash, an undefined behaviour report, a
# hang or a memory blow-up before the fix noted with it (see the fuzzing
# report). Kept in the corpus so the replay test runs them on every build.

def fnv1a(data):
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def with_batch(m):
    """Serialises `m`, varying producer_version until fuzz_onnx_loader's hash
    picks --batch 2 for it."""
    for k in range(1000):
        m.producer_version = str(k)
        data = m.SerializeToString()
        h = fnv1a(data)
        if h & 1 and (h & 6) != 6:
            return data
    raise RuntimeError("no variant selects --batch 2")


def one_node(op, inputs, outputs, attrs=None, opset=13, domain="", inits=(), graph_inputs=(), nodes_before=()):
    node = H.make_node(op, inputs, outputs, domain=domain, **(attrs or {}))
    g = H.make_graph(list(nodes_before) + [node], op.lower(), list(graph_inputs),
                     [H.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs if o], list(inits))
    extra = [domain] if domain else []
    if any(n.domain == "x.custom" for n in nodes_before):
        extra.append("x.custom")
    return model(g, opset=opset, domains=extra)


def untyped(*names):
    """Nodes of an op without a schema: their outputs have no type."""
    return [H.make_node("Unknown", [], [n], domain="x.custom") for n in names]


def f32_in(name, dims):
    return H.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def regressions():
    r = {}
    # constant_folding.cpp
    r["identity_empty_input"] = one_node("Identity", [""], ["y"])
    r["add_empty_input"] = one_node("Add", ["a", ""], ["y"], inits=[i64("a", [1])])
    cos = H.make_node("ConstantOfShape", ["shp"], ["z"])
    r["gather_zero_size_huge_outer"] = one_node(
        "Gather", ["z", "idx"], ["y"], {"axis": 1}, inits=[i64("shp", [1 << 62, 0]), i64("zero1", [0])],
        nodes_before=[cos, H.make_node("ConstantOfShape", ["zero1"], ["idx"],
                                       value=H.make_tensor("v", TensorProto.INT64, [1], [0]))])
    r["concat_dim_overflow"] = one_node("Concat", ["z", "z"], ["y"], {"axis": 1}, inits=[i64("shp", [0, 1 << 62])],
                                        nodes_before=[cos])
    r["reshape_known_overflow"] = one_node(
        "Reshape", ["z", "shp"], ["y"], {"allowzero": 1}, inits=[i64("zero1", [0]), i64("shp", [1 << 40, 1 << 40, 0])],
        nodes_before=[H.make_node("ConstantOfShape", ["zero1"], ["z"])])
    slice_in = [i64("d", [1, 2, 3, 4, 5]), i64("ax", [0])]
    r["slice_step_overflow"] = one_node("Slice", ["d", "s", "e", "ax", "st"], ["y"],
                                        inits=slice_in + [i64("s", [0]), i64("e", [5]), i64("st", [2**63 - 1])])
    r["slice_neg_step_overflow"] = one_node("Slice", ["d", "s", "e", "ax", "st"], ["y"],
                                            inits=slice_in + [i64("s", [4]), i64("e", [0]), i64("st", [-2**63])])
    f = lambda n, v: numpy_helper.from_array(np.array(v, dtype=np.float32), n)  # noqa: E731
    r["neg_float_huge"] = one_node("Neg", ["f"], ["y"], inits=[f("f", [1e30])])
    r["div_float_by_zero"] = one_node("Div", ["f", "z"], ["y"], inits=[f("f", [1.0]), f("z", [0.0])])
    r["not_float"] = one_node("Not", ["f"], ["y"], inits=[f("f", [0.0, 2.0])])
    r["mul_float_out_of_range"] = one_node("Mul", ["f", "f"], ["y"], inits=[f("f", [3e38])])
    r["reducesum_int_overflow"] = one_node("ReduceSum", ["a"], ["y"], {"keepdims": 0}, opset=11,
                                           inits=[i64("a", [2**63 - 1, 1])])
    r["neg_int_min"] = one_node("Neg", ["a"], ["y"], inits=[i64("a", [-2**63])])
    r["range_int_overflow"] = one_node("Range", ["s", "l", "d"], ["y"],
                                       inits=[i64("s", -9 * 10**18, []), i64("l", 9 * 10**18, []),
                                              i64("d", 1 << 60, [])])
    r["unsqueeze_rank_blowup"] = one_node(
        "Add", ["u", "u"], ["y"], inits=[i64("zero", 0, []), i64("one", 1, []), i64("n", 65536, []),
                                         i64("m", 20001, [])],
        nodes_before=[H.make_node("Range", ["zero", "n", "one"], ["r"]),
                      H.make_node("Range", ["one", "m", "one"], ["axes"]),
                      H.make_node("Unsqueeze", ["r", "axes"], ["u"])])
    # graph_builder.cpp
    unnamed = i64("", [1])
    r["unnamed_initializer"] = one_node("Identity", ["x"], ["y"], graph_inputs=[f32_in("x", [1])], inits=[unnamed])
    r["live_bytes_overflow"] = one_node("Identity", ["x0"], ["y"],
                                        graph_inputs=[f32_in(f"x{i}", [1 << 57]) for i in range(16)])
    # onnx_loader.cpp: --batch made inputs of unknown rank scalars (then GRU-3's
    # inference indexed their dims).
    r["batch_shapeless_gru"] = with_batch(one_node("GRU", ["x", "w", "r"], ["y"], opset=3,
                                                   graph_inputs=[f32_in(n, None) for n in "xwr"]))
    # shape_inference.cpp: ONNX 1.12 inference functions that crash or hang.
    conv_x, conv_w = f32_in("x", [1, 2, 9]), f32_in("w", [4, 2, 1, 1])
    r["conv_weight_rank"] = one_node("Conv", ["x", "w"], ["y"], opset=9, graph_inputs=[conv_x, conv_w])
    then_g = H.make_graph([H.make_node("Conv", ["x", "w"], ["t"])], "then", [], [f32_in("t", None)])
    else_g = H.make_graph([H.make_node("Identity", ["x"], ["e"])], "else", [], [f32_in("e", None)])
    r["conv_weight_rank_in_if"] = one_node("If", ["c"], ["y"], {"then_branch": then_g, "else_branch": else_g},
                                           graph_inputs=[f32_in("x", [1, 2, 9]), f32_in("w", [4, 2, 1, 1]),
                                                         H.make_tensor_value_info("c", TensorProto.BOOL, [])])
    x4, w4 = f32_in("x", [1, 2, 5, 5]), f32_in("w", [4, 2, 1, 1])
    r["conv_zero_stride"] = one_node("Conv", ["x", "w"], ["y"], {"strides": [0, 0]}, graph_inputs=[x4, w4])
    r["conv_transpose_weight_rank"] = one_node("ConvTranspose", ["x", "w"], ["y"],
                                               graph_inputs=[x4, f32_in("w", [4])])
    r["maxpool_auto_pad_huge"] = one_node("MaxPool", ["x"], ["y"], {"kernel_shape": [1, 1], "strides": [2, 2],
                                                                     "auto_pad": "SAME_UPPER"},
                                          graph_inputs=[f32_in("x", [1, 2, 1 << 60, 5])])
    body = H.make_graph([H.make_node("Identity", ["s"], ["s2"])], "body", [f32_in("s", [2])], [f32_in("s2", [2])])
    r["scan_no_num_scan_inputs"] = one_node("Scan", ["s0"], ["s"], {"body": body},
                                            graph_inputs=[f32_in("s0", [2])])
    # A shape value of 2^40 entries, declared on a node output so that --batch
    # (which rewrites graph inputs) leaves it alone.
    long_shape = [H.make_node("Unknown", [], ["shape"], domain="x.custom")]
    long_shape_vi = H.make_tensor_value_info("shape", TensorProto.INT64, [1 << 40])
    r["constant_of_shape_long_shape"] = one_node("ConstantOfShape", ["shape"], ["y"], nodes_before=long_shape)
    r["constant_of_shape_long_shape"].graph.value_info.append(long_shape_vi)
    r["expand_long_shape"] = one_node("Expand", ["x", "shape"], ["y"], graph_inputs=[f32_in("x", [1])],
                                      nodes_before=long_shape)
    r["expand_long_shape"].graph.value_info.append(long_shape_vi)
    r["depth_to_space_blocksize"] = one_node("DepthToSpace", ["x"], ["y"], {"blocksize": 1 << 40}, opset=1,
                                             graph_inputs=[x4])
    r["gemm6_rank1"] = one_node("Gemm", ["a", "b", "c"], ["y"], opset=6,
                                graph_inputs=[f32_in("a", [2]), f32_in("b", [2]), f32_in("c", [2])])
    r["lstm1_scalar"] = one_node("LSTM", ["x", "w", "r"], ["y"], opset=1,
                                 graph_inputs=[f32_in(n, []) for n in "xwr"])
    r["layer_norm_shapeless"] = one_node("LayerNormalization", ["x", "s"], ["y", "m", "v"], opset=17,
                                         graph_inputs=[f32_in("x", None), f32_in("s", None)])
    r["stft_scalar"] = one_node("STFT", ["x", "step"], ["y"], opset=17,
                                graph_inputs=[f32_in("x", []), H.make_tensor_value_info("step", TensorProto.INT64, [])])
    r["eyelike_untyped"] = one_node("EyeLike", ["x"], ["y"], {"dtype": TensorProto.FLOAT}, opset=9,
                                    nodes_before=untyped("x"))
    for op, attrs in (("CategoryMapper", {}), ("DictVectorizer", {"int64_vocabulary": [1, 2]}),
                      ("LabelEncoder", {})):
        r[f"ml_{op.lower()}_untyped"] = one_node(op, ["x"], ["y"], attrs, domain="ai.onnx.ml",
                                                  nodes_before=untyped("x"))
    # A 64+ axis input through a chain of nodes: inference used to copy every
    # axis into every value (quadratic; 5 GB for a 42 KB file).
    relus = [H.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(30)]
    g = H.make_graph(relus, "rank_blowup", [f32_in("t0", [1] * 300)], [f32_in("t30", None)])
    r["rank_blowup"] = model(g)
    return r


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        "shape_chain.onnx": shape_chain(),
        "shape_arith.onnx": shape_arith(),
        "old_opset.onnx": old_opset(),
        "if_branches.onnx": if_branches(),
        "loop_nested.onnx": loop_nested(),
        "scan.onnx": scan(),
        "constants.onnx": constants_and_graph_only(),
        "odd_types.onnx": odd_types(),
        "int4_negative.onnx": int4_and_negative(),
        "big_fold.onnx": big_fold_limits(),
    }
    for name, m in seeds.items():
        save(name, m)
    chain = seeds["shape_chain.onnx"].SerializeToString()
    save("truncated.onnx", chain[: len(chain) * 2 // 3])
    # A loop body two levels deeper than the If: exercise recursion with a
    # 6-deep If chain.
    g = H.make_graph([H.make_node("Identity", ["x"], ["y0"])], "d0", [],
                     [H.make_tensor_value_info("y0", TensorProto.FLOAT, [1])])
    def leaf(d):
        return H.make_graph([H.make_node("Neg", ["x"], [f"n{d}"])], f"leaf{d}", [],
                            [H.make_tensor_value_info(f"n{d}", TensorProto.FLOAT, [1])])

    for d in range(1, 7):
        g = H.make_graph([H.make_node("If", ["c"], [f"y{d}"], then_branch=g, else_branch=leaf(d))], f"d{d}", [],
                         [H.make_tensor_value_info(f"y{d}", TensorProto.FLOAT, [1])])
    g.input.extend([H.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
                    H.make_tensor_value_info("c", TensorProto.BOOL, [])])
    save("deep_if.onnx", model(g))
    for name, m in regressions().items():
        data = m if isinstance(m, bytes) else m.SerializeToString()
        assert len(data) < 4096, (name, len(data))
        with open(os.path.join(OUT, "regress_" + name + ".onnx"), "wb") as f:
            f.write(data)
    for name in sorted(os.listdir(OUT)):
        if name.startswith(("seed_", "regress_")):
            print(name, os.path.getsize(os.path.join(OUT, name)))


if __name__ == "__main__":
    main()
