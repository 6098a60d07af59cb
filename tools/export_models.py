#!/usr/bin/python3
"""Export the graph-only ONNX example models and their expected figures.

This script builds three real networks with random weights (ResNet-50,
MobileNetV2 and a BERT-base-like encoder), exports each to ONNX with
torch.onnx.export and writes, under examples/models/:

  <name>.onnx           the exported graph, "graph-only": every initializer
                        keeps its name, dims and data_type but its data is
                        erased, and all graph.value_info entries are removed
                        (the C++ tool must infer intermediate shapes itself).
                        Constant nodes (small shape constants) are kept as is.
  <name>.expected.json  figures computed here from the full exported model
                        (weights, activations, liveness peak), which the C++
                        tool's results are compared against.

It needs Debian's python3-torch 1.13, python3-torchvision 0.14 and
python3-onnx 1.12, hence the interpreter path. CI does not run it: the
outputs are committed, and the script is run by hand when they must change:

    /usr/bin/python3 tools/export_models.py

The output is deterministic (fixed seed, static shapes), the script can be
rerun at will, and every file is written atomically.
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple
from unittest import mock

import onnx
import torch
import torch.onnx.utils
import torchvision
from onnx import AttributeProto, TensorProto, shape_inference
from torch import nn

REPO_ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = REPO_ROOT / "examples" / "models"
OPSET = 13
SEED = 0
MAX_FILE_BYTES = 1 << 20

# Bytes per element of the ONNX element types these figures may meet.
DTYPE_BYTES = {
    TensorProto.FLOAT: 4,
    TensorProto.FLOAT16: 2,
    TensorProto.BFLOAT16: 2,
    TensorProto.DOUBLE: 8,
    TensorProto.INT64: 8,
    TensorProto.INT32: 4,
    TensorProto.INT8: 1,
    TensorProto.UINT8: 1,
    TensorProto.BOOL: 1,
}
# Element types of torch's JIT tensor types, as ONNX element types.
TORCH_SCALAR_TYPES = {
    "Float": TensorProto.FLOAT, "Half": TensorProto.FLOAT16,
    "BFloat16": TensorProto.BFLOAT16, "Double": TensorProto.DOUBLE,
    "Long": TensorProto.INT64, "Int": TensorProto.INT32, "Char": TensorProto.INT8,
    "Byte": TensorProto.UINT8, "Bool": TensorProto.BOOL,
}
INTEGER_DTYPES = {
    TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.UINT16,
    TensorProto.INT32, TensorProto.UINT32, TensorProto.INT64, TensorProto.UINT64,
}

# Inputs that hold shapes, axes or indices rather than tensor data, by op.
SHAPE_INPUTS = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "ConstantOfShape": (0,),
    "Slice": (1, 2, 3, 4), "Unsqueeze": (1,), "Squeeze": (1,), "Split": (1,),
    "Range": (0, 1, 2), "Pad": (1,), "Resize": (1, 2, 3), "Upsample": (1,),
    "TopK": (1,), "OneHot": (1,), "ReduceSum": (1,), "CumSum": (1,), "Trilu": (1,),
}
# Ops whose output depends only on the *shape* of their input.
SHAPE_OF_OPS = {"Shape", "Size"}

TensorType = Tuple[int, Tuple[int, ...]]  # (ONNX elem_type, static dims)

# Where tensor shapes come from (see tensor_types).
FROM_FILE = "model file"
FROM_EXPORTER = "exporter shape inference"
FROM_ONNX = "onnx.shape_inference"


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------

class BertLikeEncoder(nn.Module):
    """BERT-base-sized encoder: token + learned position embeddings, LayerNorm,
    then 12 post-norm nn.TransformerEncoderLayer blocks with GELU.

    The encoder runs sequence-first (batch_first=False). In eval mode torch
    1.13 would otherwise take the fused "fast path"
    (torch._transformer_encoder_layer_fwd), which the ONNX exporter cannot
    export; sequence-first keeps the ordinary nn.MultiheadAttention code,
    whose packed QKV projection is split with chunk() -> Slice ops.
    """

    def __init__(self, vocab_size: int = 30522, d_model: int = 768,
                 max_positions: int = 128, num_layers: int = 12,
                 num_heads: int = 12, d_ff: int = 3072, dropout: float = 0.1):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(max_positions, d_model)
        self.embedding_norm = nn.LayerNorm(d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, num_heads, dim_feedforward=d_ff, dropout=dropout,
            activation="gelu", batch_first=False)
        self.encoder = nn.TransformerEncoder(
            layer, num_layers, enable_nested_tensor=False)
        # nn.TransformerEncoder deep-copies `layer`, so all layers would start
        # with identical weights, and LayerNorm and bias vectors start as
        # constants; the exporter would deduplicate those into one set of
        # initializers plus Identity nodes. Give every parameter its own
        # random values instead, as a trained model would have.
        for param in self.parameters():
            nn.init.normal_(param, std=0.02)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        seq_len = input_ids.shape[1]
        # Positions 0..seq_len-1: the first seq_len rows of the table.
        positions = self.position_embedding.weight[:seq_len]
        x = self.token_embedding(input_ids) + positions
        x = self.embedding_norm(x)
        x = self.encoder(x.transpose(0, 1))  # (seq, batch, d_model)
        return x.transpose(0, 1)


@dataclass
class ModelSpec:
    name: str
    build: Callable[[], nn.Module]
    input_name: str
    output_name: str
    make_input: Callable[[], torch.Tensor]
    torch_parameters: int  # asserted against the built model


def image_input() -> torch.Tensor:
    return torch.randn(1, 3, 224, 224)


def token_input() -> torch.Tensor:
    return torch.randint(0, 30522, (1, 128), dtype=torch.int64)


MODELS = [
    ModelSpec("resnet50", lambda: torchvision.models.resnet50(weights=None),
              "input", "logits", image_input, 25557032),
    ModelSpec("mobilenet_v2", lambda: torchvision.models.mobilenet_v2(weights=None),
              "input", "logits", image_input, 3504872),
    # 30522*768 + 128*768 + 2*768 + 12 * 7087872 (one encoder layer).
    ModelSpec("bert_base", BertLikeEncoder,
              "input_ids", "last_hidden_state", token_input, 108595200),
]


# --------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------

def export(model: nn.Module, spec: ModelSpec,
           example: torch.Tensor) -> Tuple[onnx.ModelProto, Dict[str, TensorType]]:
    """torch.onnx.export with static shapes and no constant folding, so that
    shape arithmetic stays as Constant/Shape/Gather/... nodes instead of
    becoming initializers (whose data the graph-only files erase).

    Also returns the tensor types that the exporter's own ONNX shape
    inference computed. torch 1.13 writes no value_info for ordinary ops, so
    they are read from the exporter's final TorchScript graph, whose value
    names are the ONNX tensor names: torch.onnx.utils._model_to_graph (a
    private function of torch 1.13) is wrapped to keep hold of that graph.
    """
    captured = []
    model_to_graph = torch.onnx.utils._model_to_graph

    def capturing_model_to_graph(*args, **kwargs):
        result = model_to_graph(*args, **kwargs)
        captured.append(result[0])
        return result

    buffer = io.BytesIO()
    with mock.patch.object(torch.onnx.utils, "_model_to_graph",
                           capturing_model_to_graph), torch.no_grad():
        torch.onnx.export(
            model, (example,), buffer,
            opset_version=OPSET,
            input_names=[spec.input_name],
            output_names=[spec.output_name],
            training=torch.onnx.TrainingMode.EVAL,
            do_constant_folding=False,
        )
    (graph,) = captured
    return onnx.load_model_from_string(buffer.getvalue()), jit_graph_types(graph)


def jit_graph_types(graph: torch._C.Graph) -> Dict[str, TensorType]:
    """Static tensor types of the values of an exported TorchScript graph."""
    types = {}
    values = list(graph.inputs()) + [v for node in graph.nodes() for v in node.outputs()]
    for value in values:
        jit_type = value.type()
        if not isinstance(jit_type, torch._C.TensorType):
            continue
        sizes = jit_type.varyingSizes()
        scalar = jit_type.scalarType()
        if sizes is None or None in sizes or scalar is None:
            continue
        types[value.debugName()] = (TORCH_SCALAR_TYPES[scalar], tuple(sizes))
    return types


def subgraphs(graph: onnx.GraphProto):
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                yield attr.g
            elif attr.type == AttributeProto.GRAPHS:
                yield from attr.graphs


def strip_to_graph_only(graph: onnx.GraphProto) -> None:
    """Erase initializer data (keeping name, dims, data_type) and drop
    value_info, in this graph and in every subgraph."""
    for init in graph.initializer:
        for field in ("raw_data", "float_data", "int32_data", "int64_data",
                      "double_data", "uint64_data", "string_data",
                      "external_data", "data_location"):
            init.ClearField(field)
    if len(graph.sparse_initializer):
        raise ValueError("sparse initializers are not handled")
    del graph.value_info[:]
    for sub in subgraphs(graph):
        strip_to_graph_only(sub)


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------

def static_type(value_info: onnx.ValueInfoProto) -> Optional[TensorType]:
    t = value_info.type.tensor_type
    if not t.elem_type or not t.HasField("shape"):
        return None
    if not all(d.HasField("dim_value") for d in t.shape.dim):
        return None
    return t.elem_type, tuple(d.dim_value for d in t.shape.dim)


def constant_type(node: onnx.NodeProto) -> TensorType:
    attr = node.attribute[0]
    if attr.name == "value":
        return attr.t.data_type, tuple(attr.t.dims)
    scalar_or_list = {
        "value_float": (TensorProto.FLOAT, ()),
        "value_int": (TensorProto.INT64, ()),
        "value_floats": (TensorProto.FLOAT, (len(attr.floats),)),
        "value_ints": (TensorProto.INT64, (len(attr.ints),)),
    }
    if attr.name not in scalar_or_list:
        raise ValueError(f"unsupported Constant attribute {attr.name}")
    return scalar_or_list[attr.name]


def tensor_types(model: onnx.ModelProto, exporter_types: Dict[str, TensorType]
                 ) -> Tuple[Dict[str, TensorType], Dict[str, List[str]]]:
    """Element type and static dims of every named tensor of the main graph.

    Sources, in order of preference: the model file itself (initializers,
    Constant nodes, value_info, graph inputs/outputs), the exporter's own
    shape inference, then onnx.shape_inference on the full model (with
    weights, data propagation on). Where several sources know a tensor they
    must agree. Returns the table and, per tensor, the sources that know it
    (the first one supplied it).
    """
    graph = model.graph
    types: Dict[str, TensorType] = {}
    known_by: Dict[str, List[str]] = {}

    def merge(source: str, found: Dict[str, TensorType]) -> None:
        for name, tensor_type in found.items():
            if name not in types:
                types[name] = tensor_type
                known_by[name] = [source]
            elif types[name] != tensor_type:
                raise AssertionError(f"{name}: {source} says {tensor_type}, "
                                     f"{known_by[name][0]} says {types[name]}")
            else:
                known_by[name].append(source)

    def value_info_types(value_infos) -> Dict[str, TensorType]:
        found = {}
        for vi in value_infos:
            tensor_type = static_type(vi)
            if tensor_type is not None:
                found[vi.name] = tensor_type
        return found

    in_file = {init.name: (init.data_type, tuple(init.dims)) for init in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            in_file[node.output[0]] = constant_type(node)
    in_file.update(value_info_types(
        list(graph.input) + list(graph.output) + list(graph.value_info)))
    merge(FROM_FILE, in_file)
    merge(FROM_EXPORTER, exporter_types)
    inferred = shape_inference.infer_shapes(
        model, check_type=True, strict_mode=True, data_prop=True)
    merge(FROM_ONNX, value_info_types(
        list(inferred.graph.value_info) + list(inferred.graph.output)))
    return types, known_by


def tensor_bytes(tensor_type: TensorType) -> Tuple[int, int]:
    dtype, dims = tensor_type
    elements = math.prod(dims)
    return elements, elements * DTYPE_BYTES[dtype]


def weight_tensors(graph: onnx.GraphProto) -> Dict[str, str]:
    """Weights, mapped to what produced them: the initializers, the outputs
    of Constant nodes, and the outputs of every node with at least one input
    whose inputs are all weights. File order is topological, so one pass
    suffices."""
    weights = {init.name: "initializer" for init in graph.initializer}
    for node in graph.node:
        inputs = [name for name in node.input if name]
        if node.op_type == "Constant" or (inputs and all(i in weights for i in inputs)):
            for out in node.output:
                if out:
                    weights.setdefault(out, node.op_type)
    return weights


def compute_figures(model: onnx.ModelProto,
                    exporter_types: Dict[str, TensorType]) -> Tuple[dict, dict]:
    """Expected figures of the main graph, plus details for the report."""
    graph = model.graph
    if any(True for _ in subgraphs(graph)):
        raise ValueError("graphs with subgraphs are not handled by these figures")
    types, known_by = tensor_types(model, exporter_types)
    weights = weight_tensors(graph)
    initializer_names = {init.name for init in graph.initializer}
    n = len(graph.node)

    # Activations: graph inputs that are not initializers, and every node
    # output that is not a weight, with their live ranges [first, last].
    first: Dict[str, int] = {}
    for value in graph.input:
        if value.name not in initializer_names:
            first[value.name] = 0
    for index, node in enumerate(graph.node):
        for out in node.output:
            if out and out not in weights:
                first[out] = index
    last = dict(first)
    for index, node in enumerate(graph.node):
        for name in node.input:
            if name in first:
                last[name] = max(last[name], index)
    for value in graph.output:
        if value.name in first:
            last[value.name] = n - 1

    missing = sorted(name for name in list(weights) + list(first) if name not in types)
    if missing:
        raise ValueError(f"no static shape for {len(missing)} tensors: {missing[:20]}")

    weight_elements = weight_bytes = 0
    by_producer: Counter = Counter()
    for name, producer in weights.items():
        elements, nbytes = tensor_bytes(types[name])
        weight_elements += elements
        weight_bytes += nbytes
        by_producer[producer] += elements

    live = [0] * (n + 1)  # difference array over node indices
    activation_total = 0
    for name, start in first.items():
        _, nbytes = tensor_bytes(types[name])
        activation_total += nbytes
        live[start] += nbytes
        live[last[name] + 1] -= nbytes
    peak = peak_index = running = 0
    for index in range(n):
        running += live[index]
        if running > peak:
            peak, peak_index = running, index

    figures = {
        "node_count": n,
        "initializer_elements": sum(math.prod(i.dims) for i in graph.initializer),
        "onnx_weight_tensors": len(weights),
        "onnx_weight_elements": weight_elements,
        "onnx_weight_bytes": weight_bytes,
        "onnx_weight_elements_by_producer": dict(sorted(by_producer.items())),
        "activation_tensors": len(first),
        "activation_total_bytes": activation_total,
        "activation_peak_live_bytes": peak,
        "activation_peak_node_index": peak_index,
        "activation_peak_node_name": graph.node[peak_index].name,
    }
    counted = list(weights) + list(first)
    shape_sources = Counter(known_by[name][0] for name in counted)
    shape_sources["confirmed by " + FROM_ONNX] = sum(
        FROM_ONNX in known_by[name][1:] for name in counted)
    details = {"shape_sources": shape_sources, "types": types}
    return figures, details


# --------------------------------------------------------------------------
# Checks and explanations
# --------------------------------------------------------------------------

def shape_input_problems(graph: onnx.GraphProto) -> List[str]:
    """Shape-like inputs (Reshape targets, Slice bounds, ...) must be
    computable from Constant nodes and Shape/Size ops alone: anything
    reaching an initializer or a graph input is reported."""
    producer = {out: node for node in graph.node for out in node.output if out}
    initializer_names = {init.name for init in graph.initializer}
    problems = []

    def sources_ok(name: str, seen: set) -> Optional[str]:
        if name in seen:
            return None
        seen.add(name)
        node = producer.get(name)
        if node is None:
            kind = "initializer" if name in initializer_names else "graph input"
            return f"{kind} {name}"
        if node.op_type == "Constant" or node.op_type in SHAPE_OF_OPS:
            return None
        if not [i for i in node.input if i]:
            return f"input-less {node.op_type} node {node.name}"
        for source in node.input:
            if source:
                bad = sources_ok(source, seen)
                if bad:
                    return bad
        return None

    for node in graph.node:
        for position in SHAPE_INPUTS.get(node.op_type, ()):
            if position < len(node.input) and node.input[position]:
                bad = sources_ok(node.input[position], set())
                if bad:
                    problems.append(f"{node.name} ({node.op_type}) input {position} <- {bad}")
    return problems


def integer_initializers(graph: onnx.GraphProto) -> List[dict]:
    return [{"name": i.name, "dtype": TensorProto.DataType.Name(i.data_type),
             "dims": list(i.dims)}
            for i in graph.initializer if i.data_type in INTEGER_DTYPES]


def batchnorm_explanation(model: nn.Module, figures: dict, torch_parameters: int) -> str:
    """Why the CNN's ONNX weights differ from its torch parameters, with
    numbers predicted from the model structure and checked against the
    exported graph."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    channels = sum(bn.num_features for bn in bns)
    # The exporter's eval peephole turns conv(W, no bias) + BN(gamma, beta,
    # mean, var) into one conv with weight W * s and bias beta - mean * s,
    # s = gamma / sqrt(var + eps): BN's gamma and beta (2 * C parameters)
    # vanish and each conv gains a C-element bias.
    fused_biases = []
    for bn in bns:
        scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
        fused_biases.append((bn.bias - bn.running_mean * scale).detach())
    # The exporter then keeps one initializer per group of identical
    # tensors; the other members become Identity nodes reading it.
    distinct: List[torch.Tensor] = []
    duplicated = 0
    for bias in fused_biases:
        if any(b.shape == bias.shape and torch.equal(b, bias) for b in distinct):
            duplicated += bias.numel()
        else:
            distinct.append(bias)

    after_fusion = torch_parameters - 2 * channels + channels
    expected_initializers = after_fusion - duplicated
    by_producer = figures["onnx_weight_elements_by_producer"]
    if figures["initializer_elements"] != expected_initializers:
        raise AssertionError(
            f"initializer elements {figures['initializer_elements']} != "
            f"structural prediction {expected_initializers}")
    if by_producer.get("Identity", 0) != duplicated:
        raise AssertionError(
            f"Identity weight elements {by_producer.get('Identity', 0)} != "
            f"deduplicated elements {duplicated}")
    constants = by_producer.get("Constant", 0)
    others = figures["onnx_weight_elements"] - after_fusion - constants
    text = (
        f"onnx_weight_elements ({figures['onnx_weight_elements']}) differs from "
        f"torch_parameters ({torch_parameters}) because the exporter folds each of the "
        f"{len(bns)} BatchNorm layers ({channels} channels in all) into the preceding "
        f"bias-free convolution: BN weight and bias ({2 * channels} parameters) disappear "
        f"and each conv gains a bias ({channels} elements), predicted difference "
        f"-{channels}, giving {after_fusion}. The exporter also deduplicates identical "
        f"tensors (the fused biases of freshly initialised BN layers are all zero): "
        f"{duplicated} elements are no longer initializers but outputs of Identity nodes "
        f"reading the kept copy, so initializer_elements = {after_fusion} - {duplicated} "
        f"= {expected_initializers}, while those Identity outputs still count as weights. "
        f"Constant nodes add {constants} elements")
    if others:
        text += f" and other weight-only nodes {others}"
    return text + f": {after_fusion} + {constants + others} = {figures['onnx_weight_elements']}."


def generic_explanation(figures: dict, torch_parameters: int) -> str:
    by_producer = figures["onnx_weight_elements_by_producer"]
    derived = {p: e for p, e in by_producer.items() if p not in ("initializer", "Constant")}
    parts = ", ".join(f"{producer} {elements}" for producer, elements in derived.items())
    return (
        f"onnx_weight_elements ({figures['onnx_weight_elements']}) differs from "
        f"torch_parameters ({torch_parameters}): the initializers hold "
        f"{figures['initializer_elements']} elements (every parameter is one "
        f"initializer), Constant nodes add {by_producer.get('Constant', 0)}, and, as "
        f"constant folding is off, nodes computed from weights only add "
        f"{sum(derived.values())} more (by op: {parts}; e.g. each Linear weight "
        f"feeding a MatMul is transposed by a Transpose node).")


METHOD = (
    "Computed by tools/export_models.py from the full exported model, before its "
    "initializer data and value_info were erased. Weights: initializers, Constant node "
    "outputs, and outputs of nodes with at least one input whose inputs are all weights; "
    "each tensor counted once; bytes = elements x dtype size. Activations: graph inputs "
    "that are not initializers plus every node output that is not a weight. Nodes are "
    "numbered 0..N-1 in file order; an activation produced by node p (graph inputs: "
    "p = 0) is live on [p, c], c = its last reader (N-1 for graph outputs, p if never "
    "read); live bytes at node i = bytes of the activations live at i; peak = the first "
    "maximum. Shapes of the {counted} counted tensors: {from_file} from the file itself "
    "(initializers, Constant nodes, graph inputs and outputs), {from_exporter} from "
    "torch.onnx.export's own ONNX shape inference (torch 1.13 writes no value_info for "
    "them, so they were read from the exporter's final TorchScript graph), {from_onnx} "
    "from onnx.shape_inference; onnx.shape_inference.infer_shapes(data_prop=True) on the "
    "full model independently gave the same static shape for {confirmed} of them and a "
    "different one for none."
)


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------

def write_atomically(path: Path, data: bytes) -> None:
    """Write to a temporary file next to `path`, then rename it over `path`."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates files with mode 0600
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def io_description(values) -> dict:
    described = {}
    for vi in values:
        dtype, dims = static_type(vi)
        described[vi.name] = {
            "dtype": onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[dtype].name,
            "shape": list(dims),
        }
    return described


def export_one(spec: ModelSpec) -> dict:
    torch.manual_seed(SEED)
    model = spec.build().eval()
    example = spec.make_input()
    torch_parameters = sum(p.numel() for p in model.parameters())
    if torch_parameters != spec.torch_parameters:
        raise AssertionError(f"{spec.name}: {torch_parameters} parameters, "
                             f"expected {spec.torch_parameters}")

    full, exporter_types = export(model, spec, example)
    onnx.checker.check_model(full)
    graph = full.graph
    if any(node.domain not in ("", "ai.onnx") for node in graph.node):
        raise ValueError(f"{spec.name}: non-standard ops in the exported graph")
    if any(node.op_type == "BatchNormalization" for node in graph.node):
        raise ValueError(f"{spec.name}: BatchNormalization was not folded")

    figures, details = compute_figures(full, exporter_types)
    with torch.no_grad():
        torch_out = model(example)
    output_type = details["types"][spec.output_name]
    if output_type[1] != tuple(torch_out.shape):
        raise AssertionError(f"{spec.name}: ONNX output {output_type[1]} vs torch "
                             f"{tuple(torch_out.shape)}")

    if any(isinstance(m, nn.BatchNorm2d) for m in model.modules()):
        explanation = batchnorm_explanation(model, figures, torch_parameters)
    else:
        explanation = generic_explanation(figures, torch_parameters)
    sources = details["shape_sources"]
    expected = {
        "model": spec.name,
        "file": f"{spec.name}.onnx",
        "method": METHOD.format(
            counted=sum(sources[k] for k in (FROM_FILE, FROM_EXPORTER, FROM_ONNX)),
            from_file=sources[FROM_FILE], from_exporter=sources[FROM_EXPORTER],
            from_onnx=sources[FROM_ONNX], confirmed=sources["confirmed by " + FROM_ONNX]),
        "explanation": explanation,
        "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__,
                     "onnx": onnx.__version__, "opset": OPSET},
        "inputs": io_description(graph.input),
        "outputs": io_description(graph.output),
        "torch_parameters": torch_parameters,
        **figures,
    }
    report = {
        "shape_problems": shape_input_problems(graph),
        "integer_initializers": integer_initializers(graph),
        "shape_sources": dict(sources),
        "op_types": Counter(node.op_type for node in graph.node),
    }

    strip_to_graph_only(graph)
    try:
        onnx.checker.check_model(full)
        report["checker_graph_only"] = "passed"
    except onnx.checker.ValidationError as error:
        report["checker_graph_only"] = f"failed: {str(error).splitlines()[0]}"
    data = full.SerializeToString()
    if len(data) >= MAX_FILE_BYTES:
        raise AssertionError(f"{spec.name}.onnx is {len(data)} bytes")

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    write_atomically(OUT_DIR / f"{spec.name}.onnx", data)
    text = json.dumps(expected, indent=2, sort_keys=True) + "\n"
    write_atomically(OUT_DIR / f"{spec.name}.expected.json", text.encode())
    report["file_bytes"] = len(data)
    report["expected"] = expected
    return report


def main() -> None:
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, "
          f"onnx {onnx.__version__}, opset {OPSET}")
    for spec in MODELS:
        report = export_one(spec)
        fig = report["expected"]
        print(f"\n{spec.name}.onnx: {report['file_bytes']} bytes, {fig['node_count']} nodes")
        for key in ("torch_parameters", "initializer_elements", "onnx_weight_tensors",
                    "onnx_weight_elements", "onnx_weight_bytes",
                    "onnx_weight_elements_by_producer", "activation_tensors",
                    "activation_total_bytes", "activation_peak_live_bytes",
                    "activation_peak_node_index", "activation_peak_node_name"):
            print(f"  {key}: {fig[key]}")
        print(f"  shapes from: {report['shape_sources']}")
        print(f"  checker (full model): passed; checker (graph-only): "
              f"{report['checker_graph_only']}")
        print(f"  integer initializers: {report['integer_initializers'] or 'none'}")
        print(f"  shape inputs not from Constant/Shape: {report['shape_problems'] or 'none'}")
        if spec.name == "bert_base":
            print("  op types: " + ", ".join(
                f"{op} {count}" for op, count in report["op_types"].most_common()))


if __name__ == "__main__":
    main()
