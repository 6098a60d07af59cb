"""Every command from Python gives the command line's answer, field by field."""

import json
import os

import pytest

import gpumem
from conftest import ROOT, cli_json, differences, run_cli, without_timings

# (function, positional arguments, keyword arguments, the same command line,
#  exit codes the command line may give)
CASES = [
    ("inspect", ["examples/models/resnet50.onnx"], {"batch": 8, "top": 2},
     ["inspect", "examples/models/resnet50.onnx", "--batch", "8", "--top", "2"], (0,)),
    ("inspect", ["examples/models/token_mlp_dynamic.onnx"], {"dim": {"batch": 4, "seq": 128}},
     ["inspect", "examples/models/token_mlp_dynamic.onnx", "--dim", "batch=4,seq=128"], (0,)),
    ("plan", ["examples/models/bert_base.onnx"], {"gpu": "16GiB"},
     ["plan", "examples/models/bert_base.onnx", "--gpu", "16GiB"], (0,)),
    ("plan", ["examples/plans/gaps.csv"], {"gpu": 1 << 20},
     ["plan", "examples/plans/gaps.csv", "--gpu", "1048576B"], (0, 3)),
    ("train", ["tests/data/train/transformer_adamw_dynamic.onnx"], {"device": "cpu", "batch": 8, "top": 3},
     ["train", "tests/data/train/transformer_adamw_dynamic.onnx", "--device", "cpu", "--batch", "8", "--top", "3"],
     (0,)),
    ("train", ["tests/data/train/resnet18_sgd.onnx"],
     {"optimizer": "adamw", "precision": "amp-bf16", "checkpoint": ["layer2", "layer3"]},
     ["train", "tests/data/train/resnet18_sgd.onnx", "--optimizer", "adamw", "--precision", "amp-bf16",
      "--checkpoint", "layer2,layer3"], (0,)),
    ("fit", ["tests/data/train/resnet18_sgd.onnx"], {"optimizer": "sgd-momentum", "gpu": "1GiB"},
     ["fit", "tests/data/train/resnet18_sgd.onnx", "--optimizer", "sgd-momentum", "--gpu", "1GiB"], (0,)),
    ("fit", ["tests/data/train/resnet18_sgd.onnx"], {"gpu": "256MiB", "keep": ["batch", "precision"]},
     ["fit", "tests/data/train/resnet18_sgd.onnx", "--gpu", "256MiB", "--keep", "batch,precision"], (0, 3)),
    ("finetune", ["examples/llm/llama-3-8b"], {"method": "qlora", "context": 4096, "gpu": "24GiB", "top": 3},
     ["finetune", "examples/llm/llama-3-8b", "--method", "qlora", "--context", "4096", "--gpu", "24GiB", "--top", "3"],
     (0, 3)),
    ("llm", ["examples/llm/llama-3-8b"], {"gpu": "8GiB", "context": 16384, "quant": "q4_k_m", "kv_dtype": "q8_0"},
     ["llm", "examples/llm/llama-3-8b", "--gpu", "8GiB", "--context", "16384", "--quant", "q4_k_m",
      "--kv-dtype", "q8_0"], (0, 3)),
    ("llm", ["examples/llm/llama-3-8b"], {"engine": "vllm", "gpu": "80GiB"},
     ["llm", "examples/llm/llama-3-8b", "--engine", "vllm", "--gpu", "80GiB"], (0,)),
    ("weights", ["tests/data/weights/tiny_llama.safetensors"], {"top": 4},
     ["weights", "tests/data/weights/tiny_llama.safetensors", "--top", "4"], (0,)),
    ("replay", ["tests/data/traces/resnet18_train.json"], {"policy": ["pytorch", "bfc"]},
     ["replay", "tests/data/traces/resnet18_train.json", "--policy", "pytorch,bfc"], (0,)),
    ("replay", ["tests/data/traces/resnet18_train.json"], {"gpu": "64MiB"},
     ["replay", "tests/data/traces/resnet18_train.json", "--gpu", "64MiB"], (0, 3)),
    ("trace_stats", ["tests/data/traces/leaky_mlp_train.json"], {},
     ["trace", "stats", "tests/data/traces/leaky_mlp_train.json"], (0,)),
    ("serve_sim", ["examples/llm/llama-3-8b"], {"gpu": "19GiB", "requests": "examples/serve/bursty.csv"},
     ["serve-sim", "examples/llm/llama-3-8b", "--gpu", "19GiB", "--requests",
      "examples/serve/bursty.csv"], (0,)),
]


@pytest.fixture(autouse=True)
def in_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize("function,positional,kwargs,argv,codes", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_every_field_equals_the_command_lines(function, positional, kwargs, argv, codes):
    result = getattr(gpumem, function)(*positional, **kwargs)
    expected = cli_json(*argv, check_codes=codes)
    assert differences(dict(result), expected) == []
    assert result.to_dict() == json.loads(json.dumps(result))
    # The text report is the command line's, byte for byte.
    code, text, _ = run_cli(*argv, check_codes=codes)
    assert without_timings(result.text()) == without_timings(text)
    assert result.exit_code == code


def test_fields_read_as_attributes_and_keys():
    r = gpumem.train("tests/data/train/resnet18_sgd.onnx", device="cpu", optimizer="sgd-momentum")
    assert r.peak_bytes == r["peak_bytes"] == sum(r.breakdown.values())
    assert r.breakdown.optimizer_states == r["breakdown"]["optimizer_states"] > 0
    assert "peak_bytes" in dir(r)
    with pytest.raises(AttributeError, match="no field 'peak'"):
        r.peak
    with pytest.raises(AttributeError):
        r.peak_bytes = 1
    assert repr(r).startswith("<gpumem train: peak_bytes=") and "MiB" in repr(r)
    assert r.command_line.startswith("gpumem train tests/data/train/resnet18_sgd.onnx")


def test_html_is_the_commands_report(tmp_path):
    r = gpumem.inspect("examples/models/resnet50.onnx", batch=8)
    out = tmp_path / "cli.html"
    run_cli("inspect", "examples/models/resnet50.onnx", "--batch", "8", "--html", out)
    assert r.html() == out.read_text()
    inline = r._repr_html_()
    assert inline.startswith("<iframe srcdoc=") and "&lt;html" in inline
    # Every command with a report has a page (issue 46): llm's leads with its verdict.
    f = gpumem.llm("examples/llm/llama-3-8b", gpu="8GiB")
    assert f.html().startswith("<!DOCTYPE html>") and "Verdict" in f.html()
    q = gpumem.quantize("tests/data/weights/tiny_llama.safetensors", tmp_path / "q.gguf", type="q8_0")
    assert "Each tensor" in q.html()


def test_quantize_writes_what_the_command_line_writes(tmp_path):
    py_out, cli_out = tmp_path / "py.gguf", tmp_path / "cli.gguf"
    r = gpumem.quantize("tests/data/weights/tiny_llama.safetensors", py_out, type="q4_k_m")
    expected = cli_json("quantize", "tests/data/weights/tiny_llama.safetensors", cli_out, "--type", "q4_k_m")
    assert py_out.read_bytes() == cli_out.read_bytes()
    assert differences({k: v for k, v in r.items() if "output" not in k},
                       {k: v for k, v in expected.items() if "output" not in k}) == []


def test_trace_convert_and_report_write_the_same_files(tmp_path):
    gpumem.trace_convert("tests/data/traces/resnet18_train.json", tmp_path / "py.csv", to="csv")
    run_cli("trace", "convert", "tests/data/traces/resnet18_train.json", "--to", "csv", "-o", tmp_path / "cli.csv")
    assert (tmp_path / "py.csv").read_bytes() == (tmp_path / "cli.csv").read_bytes()
    gpumem.trace_plan("tests/data/traces/resnet18_train.json", tmp_path / "py.json", time_limit=0)
    run_cli("trace", "plan", "tests/data/traces/resnet18_train.json", "--time-limit", "0", "-o", tmp_path / "cli.json")
    assert differences(json.loads((tmp_path / "py.json").read_text()),
                       json.loads((tmp_path / "cli.json").read_text())) == []
    path = gpumem.report("examples/models/mobilenet_v2.onnx", tmp_path / "r.html", time_limit=0)
    assert os.path.getsize(path) > 10_000


def test_serve_sim_generates_the_same_trace(tmp_path):
    text = gpumem.serve_sim(generate="sharegpt", count=50, seed=7)
    assert text == run_cli("serve-sim", "--generate", "sharegpt", "--count", "50", "--seed", "7")[1]
    assert len(text.splitlines()) >= 50
    path = gpumem.serve_sim(generate="bursty", count=20, output=tmp_path / "b.csv")
    assert path == str(tmp_path / "b.csv") and (tmp_path / "b.csv").read_text().count("\n") >= 20


def test_bad_input_is_the_command_lines_one_line():
    with pytest.raises(gpumem.InputError) as caught:
        gpumem.inspect("examples/bad/truncated.onnx")
    _, _, err = run_cli("inspect", "examples/bad/truncated.onnx", check_codes=(2,))
    assert f"gpumem: error: {caught.value}\n" == err
    assert caught.value.exit_code == 2
    with pytest.raises(gpumem.InputError, match="weights.*gguf|GGUF|llm"):
        gpumem.inspect("tests/data/weights/tiny_llama.safetensors")


def test_keywords_are_the_flags():
    with pytest.raises(TypeError, match="did you mean 'optimizer'"):
        gpumem.train("tests/data/train/resnet18_sgd.onnx", optimiser="adam")
    with pytest.raises(TypeError, match="switch"):
        gpumem.fit("tests/data/train/resnet18_sgd.onnx", gpu="1GiB", max_batch="yes")
    with pytest.raises(TypeError, match="results are the command's JSON"):
        gpumem.inspect("examples/models/resnet50.onnx", json=True)
    # An int size is bytes; a bare number on the command line would be refused.
    assert gpumem.plan("examples/plans/gaps.csv", gpu=1 << 30).capacity_bytes == 1 << 30
    with pytest.raises(gpumem.InputError, match="did you mean"):
        gpumem.plan("examples/plans/gaps.csv", gpu="24")
    assert {"optimizer", "precision", "batch", "checkpoint"} <= set(gpumem.flags("train"))
    assert gpumem.flags("fit")["gpu"][0] == "SIZE"
    with pytest.raises(ValueError, match="no command"):
        gpumem.flags("trian")


def test_run_gives_any_command_line():
    code, out, err = gpumem.run("--version")
    assert (code, out.strip()) == (0, "gpumem 0.1.0")
    code, out, err = gpumem.run("inspect", "nope.onnx")
    assert code == 2 and err == "gpumem: error: nope.onnx: no such file\n"
    code, out, _ = gpumem.run("train", "--help")
    assert code == 0 and "--optimizer" in out


def test_exporter_metrics_collects_once():
    text = gpumem.exporter_metrics(simulate="tests/data/traces/resnet18_train.json", gpu="1GiB",
                                   interval="100ms", blocks_prefix="gpumem-pytest-")
    # The simulated publisher's block, read back under its prefix.
    assert "gpumem_allocator_reserved_bytes{" in text


def test_commands_run_concurrently_from_threads():
    from concurrent.futures import ThreadPoolExecutor
    args = ("tests/data/train/resnet18_sgd.onnx",)
    with ThreadPoolExecutor(4) as pool:
        peaks = list(pool.map(lambda b: gpumem.train(*args, batch=b, device="cpu").peak_bytes, [2, 4, 8, 2, 4, 8]))
    assert peaks[:3] == peaks[3:] and peaks[0] < peaks[1] < peaks[2]
