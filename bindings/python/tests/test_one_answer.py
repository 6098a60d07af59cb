"""One question, one answer (issue 46): "does it fit?" asked through every route.

Each question is asked as the command's text report, as its --json document
and as the Python function; the verdict (the GPU, what the device must hold,
fits, headroom or shortfall) must be the same figure by every route, to the
byte in JSON and Python and as the text prints it. Where two commands answer
the same question (train --gpu and fit with every lever kept), they must
agree too.
"""

import re

import pytest

import gpumem
from conftest import cli_json, run_cli

LLAMA = "examples/llm/llama-3-8b"
RESNET = "tests/data/train/resnet18_sgd.onnx"
TRANSFORMER = "tests/data/train/transformer_adamw.onnx"
BERT = "examples/models/bert_base.onnx"
TOKEN_MLP = "examples/models/token_mlp_dynamic.onnx"

# (command, positional, flags): each a question with a --gpu.
QUESTIONS = (
    [("train", RESNET, {"optimizer": "sgd-momentum", "batch": b, "gpu": g})
     for b, g in [(2, "600MiB"), (4, "700MiB"), (8, "800MiB"), (8, "1GiB"), (16, "1GiB"), (16, "2GiB")]]
    + [("train", TRANSFORMER, {"gpu": g}) for g in ("600MiB", "1GiB", "2GiB")]
    + [("train", RESNET, {"optimizer": "sgd-momentum", "device": "cpu", "gpu": "300MiB"})]
    + [("fit", RESNET, {"optimizer": "sgd-momentum", "gpu": g}) for g in ("600MiB", "800MiB", "1GiB", "2GiB")]
    + [("fit", RESNET, {"optimizer": "adamw", "gpu": "1GiB", "max_batch": True})]
    + [("fit", BERT, {"gpu": g}) for g in ("2GiB", "4GiB")]
    + [("fit", BERT, {"gpu": "2GiB", "keep": ["optimizer", "precision"]})]
    + [("finetune", LLAMA, {"method": m, "gpu": g, "context": c})
       for m, g, c in [("lora", "24GiB", "2k"), ("lora", "16GiB", "4k"), ("qlora", "12GiB", "4k"),
                       ("qlora", "24GiB", "8k"), ("full", "80GiB", "2k"), ("full", "40GiB", "1k"),
                       ("freeze", "24GiB", "2k"), ("lora", "24GiB", "8k")]]
    + [("finetune", LLAMA, {"method": "lora", "gpu": "24GiB", "checkpoint": "layers", "context": "8k"})]
    + [("finetune", LLAMA, {"method": "full", "gpu": "80GiB", "gpus": 8, "strategy": "zero3"})]
    + [("llm", LLAMA, {"gpu": g, "context": c})
       for g, c in [("8GiB", "4k"), ("12GiB", "8k"), ("16GiB", "8k"), ("16GiB", "4k"), ("24GiB", "8k"),
                    ("80GiB", "8k")]]
    + [("llm", LLAMA, {"gpu": "16GiB", "engine": "ollama"}),
       ("llm", LLAMA, {"gpu": "8GiB", "quant": "q4_k_m"}),
       ("llm", LLAMA, {"gpu": "12GiB", "gpus": 2}),
       ("llm", LLAMA, {"gpu": "16GiB", "kv_dtype": "q8_0", "batch": 2})]
    + [("llm", LLAMA, {"gpu": g, "engine": "vllm", "context": c})
       for g, c in [("16GiB", "8k"), ("24GiB", "8k"), ("80GiB", "8k"), ("20GiB", "4k")]]
    + [("llm", LLAMA, {"gpu": "16GiB", "engine": "vllm", "quant": q}) for q in ("awq", "fp8")]
    + [("plan", BERT, {"gpu": g}) for g in ("100MiB", "16GiB")]
    + [("plan", TOKEN_MLP, {"dim": {"batch": 8, "seq": 512}, "gpu": g}) for g in ("32MiB", "64MiB")]
    + [("plan", "examples/plans/gaps.csv", {"gpu": "6B"})]
)


def argv(positional, flags):
    args = [positional]
    for key, value in flags.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, dict):
            args += [flag, ",".join(f"{k}={v}" for k, v in value.items())]
        elif isinstance(value, list):
            args += [flag, ",".join(value)]
        else:
            args += [flag, str(value)]
    return args


VERDICT_LINE = re.compile(r"(FITS|DOES NOT FIT) a GPU of (.+?): needs (.+?), (.+?) (headroom|short)")


def test_there_are_forty_questions_or_more():
    assert len(QUESTIONS) >= 40


@pytest.mark.parametrize("command,positional,flags", QUESTIONS,
                         ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(QUESTIONS)])
def test_every_route_gives_the_same_verdict(command, positional, flags):
    args = [command] + argv(positional, flags)
    document = cli_json(*args, check_codes=(0, 3))
    verdict = document["verdict"]
    assert set(verdict) == {"gpu_bytes", "device_bytes", "fits", "headroom_bytes", "short_bytes"}
    assert verdict["fits"] == (verdict["device_bytes"] <= verdict["gpu_bytes"])
    # The exit code says the same.
    code, text, _ = run_cli(*args, check_codes=(0, 3))
    assert code == (0 if verdict["fits"] else 3)
    # The text prints the same figures.
    lines = [m for m in map(VERDICT_LINE.search, text.splitlines()) if m]
    assert lines, text
    said = lines[0]
    assert (said.group(1) == "FITS") == verdict["fits"]
    assert said.group(2) == gpumem.format_bytes(verdict["gpu_bytes"])
    assert said.group(3) == gpumem.format_bytes(verdict["device_bytes"])
    margin = verdict["headroom_bytes"] if verdict["fits"] else verdict["short_bytes"]
    assert said.group(4) == gpumem.format_bytes(margin)
    # Python returns the same document.
    result = getattr(gpumem, command)(positional, **flags)
    assert dict(result.verdict) == verdict
    assert result.exit_code == code


@pytest.mark.parametrize("batch,gpu", [(2, "600MiB"), (8, "800MiB"), (8, "1GiB"), (16, "1GiB")])
def test_train_and_fit_agree_on_the_same_step(batch, gpu):
    common = [RESNET, "--optimizer", "sgd-momentum", "--batch", str(batch), "--gpu", gpu]
    train = cli_json("train", *common, check_codes=(0, 3))["verdict"]
    fit = cli_json("fit", *common, "--keep", "optimizer,precision,checkpoint,batch,offload",
                   check_codes=(0, 3))["verdict"]
    assert train == fit


# Issue 46: every page shows the verdict, the breakdown and the changes its
# text report shows, figure by figure.
PAGES = [
    ("train", [RESNET, "--optimizer", "sgd-momentum", "--gpu", "800MiB"]),
    ("train", [TRANSFORMER, "--gpu", "1GiB"]),
    ("fit", [RESNET, "--optimizer", "sgd-momentum", "--gpu", "700MiB"]),
    ("fit", [BERT, "--gpu", "2GiB"]),
    ("finetune", [LLAMA, "--method", "qlora", "--context", "4k", "--gpu", "12GiB"]),
    ("finetune", [LLAMA, "--method", "full", "--gpu", "24GiB"]),
    ("llm", [LLAMA, "--gpu", "12GiB", "--context", "8k"]),
    ("llm", [LLAMA, "--gpu", "24GiB", "--gpus", "2"]),
    ("plan", [BERT, "--gpu", "100MiB"]),
    ("plan", [TOKEN_MLP, "--dim", "batch=8,seq=512", "--gpu", "64MiB"]),
    ("llm", [LLAMA, "--engine", "vllm", "--gpu", "16GiB"]),
    ("llm", [LLAMA, "--engine", "vllm", "--gpu", "24GiB", "--quant", "fp8"]),
    ("weights", ["tests/data/weights/tiny_llama_f16.gguf"]),
    ("weights", ["tests/data/weights/tiny_llama.safetensors", "--duplicates"]),
    ("serve-sim", [LLAMA, "--gpu", "24GiB", "--requests", "examples/serve/system-prompt.csv"]),
    ("explain-oom", ["OOM"]),
    ("quantize", ["tests/data/weights/tiny_llama.safetensors", "OUT", "--type", "q4_k_m"]),
]
# Pages that are their text's rows as tables: every cell of a row is on one
# line of the text.
TABLE_PAGES = {"weights", "serve-sim", "explain-oom", "quantize"}
OOM = ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 14.76 GiB total capacity; 14.56 GiB "
       "already allocated; 3.44 MiB free; 14.72 GiB reserved in total by PyTorch)\n")


def page_parts(page):
    import html as html_module
    verdict = re.search(r"<h2>Verdict</h2>\s*<p>(.*?)</p>", page)
    rows = [[html_module.unescape(re.sub(r"<[^>]+>", "", cell)) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", page)]
    return (html_module.unescape(verdict.group(1)) if verdict else None), [r for r in rows if r]


@pytest.mark.parametrize("command,args", PAGES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(PAGES)])
def test_every_page_says_what_its_text_says(command, args, tmp_path):
    page_path = tmp_path / "page.html"
    if "OOM" in args:
        message = tmp_path / "oom.txt"
        message.write_text(OOM)
        args = [str(message) if a == "OOM" else a for a in args]
    args = [str(tmp_path / "out.gguf") if a == "OUT" else a for a in args]
    _, text, _ = run_cli(command, *args, "--html", page_path, check_codes=(0, 3))
    verdict, rows = page_parts(page_path.read_text())
    lines = text.splitlines()
    if command in TABLE_PAGES:
        assert rows
        for row in rows:
            assert any(all(cell in line for cell in row) for line in lines), f"{row} is on no line of the text"
        return
    assert verdict is not None
    assert verdict in text, f"{verdict!r} not in the text"
    breakdown = [r for r in rows if len(r) == 3 and r[1].endswith("B")]
    changes = [r for r in rows if len(r) == 4 and r[2].endswith("B")]
    assert breakdown or command == "plan"  # a plan's page shows its verdict and its arena
    for name, size, _meaning in breakdown:
        if size == "0 B":
            continue  # a category with nothing in it may be left out of a one-line text
        assert any(name in line and size in line for line in lines), f"{name} {size} not in the text"
    for change, _before, after, _cost in changes:
        label = change.removeprefix("--quant ")
        assert any(label in line and after in line for line in lines), f"{change} -> {after} not in the text"
