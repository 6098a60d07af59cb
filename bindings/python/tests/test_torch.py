"""gpumem.torch on live modules and runs, against the command line on the same files."""

import json

import pytest

torch = pytest.importorskip("torch", reason="Debian's python3-torch is not installed")
from torch import nn  # noqa: E402

import gpumem  # noqa: E402
import gpumem.torch as gt  # noqa: E402
from conftest import CLI, cli_json, differences  # noqa: E402


class TokenClassifier(nn.Module):
    """A hand-written model: embedding, a transformer layer, dropout, a head."""

    def __init__(self, vocab=500, d_model=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.layer = nn.TransformerEncoderLayer(d_model, 4, 128, dropout=0.1, batch_first=True)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(d_model, 7)

    def forward(self, tokens):
        return self.head(self.drop(self.layer(self.embed(tokens))).mean(dim=1))


def mlp_with_batchnorm():
    return nn.Sequential(nn.Linear(32, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 5))


def models():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    return [
        ("resnet18", torchvision.models.resnet18(num_classes=10), torch.randn(4, 3, 64, 64)),
        ("mobilenet_v2", torchvision.models.mobilenet_v2(num_classes=10), torch.randn(2, 3, 64, 64)),
        ("token_classifier", TokenClassifier(), torch.randint(0, 500, (8, 24))),
        ("mlp_batchnorm", mlp_with_batchnorm(), torch.randn(16, 32)),
    ]


@pytest.mark.parametrize("index", range(4), ids=["resnet18", "mobilenet_v2", "token_classifier", "mlp_batchnorm"])
def test_estimate_is_train_on_the_modules_export(index, tmp_path):
    name, model, x = models()[index]
    result = gt.estimate(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                         device="cpu")
    export = gt.export_onnx(model, x)  # the whole batch, as a user would export it
    expected = cli_json("train", export.path, "--optimizer", "sgd-momentum", "--device", "cpu",
                        "--batch", x.shape[0])
    assert differences({k: v for k, v in result.items() if k != "model"},
                       {k: v for k, v in expected.items() if k != "model"}) == []
    assert result.batch == x.shape[0] and result.settings.optimizer == "sgd-momentum"
    trainable = sum(p.numel() for p in model.parameters())
    assert result.parameters.trainable == trainable and result.parameters.frozen == 0


def test_the_module_is_left_as_it_was():
    model = mlp_with_batchnorm()
    model(torch.randn(16, 32))  # running statistics away from their initial values
    model.eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    gt.estimate(model, torch.randn(16, 32) * 5 + 3)
    assert not model.training
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_frozen_parameters_are_those_without_gradients():
    model = TokenClassifier()
    model.embed.weight.requires_grad_(False)
    r = gt.estimate(model, torch.randint(0, 500, (4, 16)), optimizer="adamw", device="cpu")
    assert r.parameters.frozen == model.embed.weight.numel()
    assert r.settings.frozen == "^(embed\\.weight)$"
    unfrozen = gt.estimate(model, torch.randint(0, 500, (4, 16)), optimizer="adamw", device="cpu", frozen=[])
    assert unfrozen.parameters.frozen == 0
    assert unfrozen.parameters.trainable - r.parameters.trainable == model.embed.weight.numel()


def test_batch_and_flags_pass_through():
    model = mlp_with_batchnorm()
    small = gt.estimate(model, torch.randn(16, 32), device="cpu")
    large = gt.estimate(model, torch.randn(16, 32), device="cpu", batch=4096)
    assert large.batch == 4096 and large.peak_bytes > small.peak_bytes
    with pytest.raises(TypeError, match="did you mean"):
        gt.estimate(model, torch.randn(16, 32), optimiser="adam")


def test_optimizers_map_to_gpumems_names():
    p = [nn.Parameter(torch.zeros(3))]
    assert gt._optimizer_name(torch.optim.SGD(p, lr=0.1))[0] == "sgd"
    assert gt._optimizer_name(torch.optim.SGD(p, lr=0.1, momentum=0.9))[0] == "sgd-momentum"
    assert gt._optimizer_name(torch.optim.AdamW(p, foreach=False)) == ("adamw", {"foreach": "off"})
    assert gt._optimizer_name(torch.optim.Adam)[0] == "adam"
    with pytest.raises(ValueError, match="AMSGrad"):
        gt._optimizer_name(torch.optim.Adam(p, amsgrad=True))
    with pytest.raises(ValueError, match="RMSprop"):
        gt._optimizer_name(torch.optim.RMSprop(p))


def test_fit_is_fit_on_the_export():
    torchvision = pytest.importorskip("torchvision")
    model = torchvision.models.resnet18(num_classes=10)
    x = torch.randn(8, 3, 64, 64)
    r = gt.fit(model, x, gpu="1GiB", max_batch=True, optimizer="adamw")
    export = gt.export_onnx(model, x)
    # No device given: the command line's default (cuda) on both routes (issue 46).
    expected = cli_json("fit", export.path, "--gpu", "1GiB", "--max-batch", "--optimizer", "adamw",
                        check_codes=(0, 3))
    assert differences({k: v for k, v in r.items() if k != "model"},
                       {k: v for k, v in expected.items() if k != "model"}) == []
    assert r.fits and r.batch > 8


def test_exporter_failures_are_explained():
    class Eigen(nn.Module):
        def forward(self, x):
            return torch.linalg.eigvalsh(x @ x.transpose(-1, -2))

    with pytest.raises(gt.ExportError, match=r"could not export Eigen: .*linalg_eigvalsh.*export the model yourself"):
        gt.estimate(Eigen(), torch.randn(4, 8, 8))
    with pytest.raises(TypeError, match="example_inputs"):
        gt.estimate(mlp_with_batchnorm(), "not a tensor")


def test_a_module_goes_to_inspect_with_example_inputs():
    model = mlp_with_batchnorm().eval()
    r = gpumem.inspect(model, example_inputs=torch.randn(16, 32))
    assert r.weights.count >= 4 and r.inference_bytes > 0
    with pytest.raises(TypeError, match="example_inputs"):
        gpumem.inspect(model)


def training_loop(model, steps, keep=None):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    torch.manual_seed(1)
    for _ in range(steps):
        x, y = torch.randn(16, 32), torch.randint(0, 5, (16,))
        optimizer.zero_grad(set_to_none=True)
        out = model(x)
        if keep is not None:
            keep.append(out.detach().clone())  # the classic leak: outputs kept across steps
        nn.functional.cross_entropy(out, y).backward()
        optimizer.step()


def test_record_gives_what_trace_stats_gives_on_the_recording(tmp_path):
    model = mlp_with_batchnorm()
    with gt.record(device="cpu") as rec:
        training_loop(model, 4)
    saved = rec.trace.save(tmp_path / "loop.json")
    stats = rec.trace.stats()
    expected = cli_json("trace", "stats", saved)
    assert differences({k: v for k, v in stats.items() if k != "trace"},
                       {k: v for k, v in expected.items() if k != "trace"}) == []
    assert stats.format == "chrome-trace" and stats.allocations > 50
    assert rec.trace.iterations["count"] == 4
    # Momentum buffers made in the first step: growth once, no leak.
    assert rec.trace.iterations.shape == "step"
    replay = rec.trace.replay(policies=["pytorch", "gpumem"])
    assert [p["name"] for p in replay.policies] == ["pytorch", "gpumem"]
    assert replay.traced_peak_bytes == stats.peak_allocated_bytes
    report = rec.trace.report(tmp_path / "loop.html")
    assert (tmp_path / "loop.html").stat().st_size > 10_000 and report.endswith("loop.html")


def test_record_finds_a_leak_where_the_loop_keeps_outputs():
    kept = []
    model = mlp_with_batchnorm()
    with gt.record(device="cpu") as rec:
        training_loop(model, 5, keep=kept)
    per_step = kept[0].numel() * kept[0].element_size()
    # The loop's end (its batch and loss freed) is not taken for a trough.
    assert rec.trace.iterations.shape == "steady growth"
    assert rec.trace.iterations.growth_bytes == per_step
    assert rec.trace.leaks.bytes >= 4 * per_step


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the errors given where there is no CUDA")
def test_cuda_only_functions_say_so_without_cuda():
    for call in (gt.snapshot, gt.use_allocator, gt.allocator_stats, lambda: gt.record(device="cuda")):
        with pytest.raises(gt.CudaUnavailableError, match="needs CUDA: torch .* (CPU-only build|no device)"):
            call()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none here)")
def test_cuda_record_and_snapshot(tmp_path):
    with gt.record(device="cuda") as rec:
        model = mlp_with_batchnorm().cuda()
        x = torch.randn(64, 32, device="cuda")
        model(x).sum().backward()
    stats = rec.trace.stats()
    assert stats.allocations > 0 and stats.format.startswith("pytorch")
    assert gt.snapshot().stats().format.startswith("pytorch")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none here)")
def test_cuda_allocator_in_a_fresh_process(tmp_path):
    import subprocess
    import sys
    script = (
        "import torch, gpumem.torch as gt\n"
        "gt.use_allocator('expandable_segments:false')\n"
        "x = torch.randn(1024, 1024, device='cuda')\n"
        "s = gt.allocator_stats()\n"
        "assert s['allocated_bytes.all.current'] >= 4 << 20, s\n"
        "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    if "needs PyTorch 2.0" in done.stderr:
        pytest.skip("PyTorch older than 2.0 has no pluggable allocator")
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr


# Issue 46: Python asks the question the command line asks.

def test_a_gpu_of_a_few_bytes_is_refused_with_the_command_lines_hint():
    model = mlp_with_batchnorm()
    with pytest.raises(gpumem.InputError, match=r"gpu=24: a size needs a unit: did you mean '24GiB'\?"):
        gt.fit(model, torch.randn(16, 32), gpu=24)
    with pytest.raises(gpumem.InputError, match="did you mean '80GiB'"):
        gpumem.llm("examples/llm/llama-3-8b", gpu=80)


def test_the_device_is_the_command_lines_default_and_the_answer_says_so():
    model = mlp_with_batchnorm()  # on the CPU, as most modules are when built
    result = gt.estimate(model, torch.randn(16, 32))
    assert result.settings.device == "cuda"
    assert result.settings.overhead_bytes == 512 << 20
    assert gt.estimate(model, torch.randn(16, 32), device="cpu").settings.device == "cpu"


def test_the_command_line_runs_again_after_the_result_is_gone():
    import shlex
    import subprocess
    model = mlp_with_batchnorm()
    result = gt.fit(model, torch.randn(16, 32), gpu="1GiB")
    line, document = result.command_line, result.to_dict()
    del result
    import gc
    gc.collect()
    argv = shlex.split(line)
    assert argv[0] == "gpumem"
    again = subprocess.run([CLI] + argv[1:] + ["--json"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["verdict"] == document["verdict"]


def sequential_cnn():
    def block(inputs, outputs):
        return [nn.Conv2d(inputs, outputs, 3, padding=1), nn.BatchNorm2d(outputs), nn.ReLU()]
    return nn.Sequential(*block(3, 32), *block(32, 32), *block(32, 64), *block(64, 64), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(64, 10))


@pytest.mark.parametrize("name", ["resnet18", "sequential_cnn"])
def test_the_emitted_checkpoint_module_runs_on_the_model_as_given(name, tmp_path):
    """Issue 46: `fit --emit checkpoint` names what the framework can wrap (a module, or a run of an
    nn.Sequential's children), and the module it writes runs on the model as written."""
    import importlib.util
    torch.manual_seed(0)
    if name == "resnet18":
        # At 96% of its need, torchvision's resnet18 checkpoints its stem
        # (bn1..maxpool): named children the ResNet's forward calls in a row.
        model = pytest.importorskip("torchvision").models.resnet18(num_classes=10)
        x, share = torch.randn(4, 3, 128, 128), 96
    else:
        model, x, share = sequential_cnn(), torch.randn(8, 3, 64, 64), 90
    keep = ["precision", "optimizer", "batch"]
    free = gt.fit(model, x, gpu="4GiB", optimizer="sgd", keep=keep, device="cpu")
    tight = gt.fit(model, x, gpu=free.verdict.device_bytes * share // 100, optimizer="sgd", keep=keep, device="cpu",
                   emit="checkpoint", output_dir=tmp_path)
    assert tight.fits and any(".." in entry for entry in tight.checkpoint), tight.text()
    for entry in tight.checkpoint:
        if ".." in entry:  # a run: children of one nn.Sequential, named by index
            first, last = entry.split("..")
            assert first.rpartition(".")[0] == last.rpartition(".")[0]
            model.get_submodule(first)
            model.get_submodule(last)
        else:
            model.get_submodule(entry)
    spec = importlib.util.spec_from_file_location("checkpoint", tmp_path / "checkpoint.py")
    plan = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plan)
    names_before = [n for n, _ in model.named_parameters()]
    expected = model(x).sum()
    plan.apply(model)
    assert [n for n, _ in model.named_parameters()] == names_before
    out = model(x).sum()
    out.backward()
    # In training mode BatchNorm normalises by the batch's own statistics: the
    # same batch gives the same output with checkpointing as without.
    assert torch.allclose(out, expected, rtol=1e-5, atol=1e-3)
    assert all(p.grad is not None for p in model.parameters())


def test_dropout_with_p_zero_is_no_op():
    """Issue 47: PyTorch's dropout returns its input when p is 0 (swin_t's dropout), keeping no noise."""
    torch.manual_seed(0)

    def mlp(dropout):
        layers = [nn.Linear(64, 1024), nn.GELU()]
        if dropout is not None:
            layers.append(nn.Dropout(dropout))
        return nn.Sequential(*layers, nn.Linear(1024, 10))

    # Activations large enough for the peak to fall where dropout's noise lives.
    x = torch.randn(512, 64)
    plain = gt.estimate(mlp(None), x, optimizer="sgd", device="cpu")
    zero = gt.estimate(mlp(0.0), x, optimizer="sgd", device="cpu")
    some = gt.estimate(mlp(0.1), x, optimizer="sgd", device="cpu")
    assert zero.peak_bytes == plain.peak_bytes
    assert dict(zero.breakdown) == dict(plain.breakdown)
    assert some.peak_bytes > plain.peak_bytes  # the control: a real dropout keeps its noise
