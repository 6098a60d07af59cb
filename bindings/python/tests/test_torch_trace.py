"""gpumem.torch.estimate's traced step (torch 2.1+, fake tensors) against the real
step: the same model, inputs and optimizer run for real on the CPU, with the
CPU allocator's own events from the profiler. Run by ctest (python_torch_trace)
in the venv scripts/torch-venv.sh makes; without one it is skipped, and
tests/train/test_traced_step.cpp checks the committed recordings instead.
"""

import contextlib
import importlib.util
import re
import subprocess

import pytest
import torch

import gpumem
import gpumem.torch
from conftest import CLI, ROOT

if tuple(int(x) for x in re.findall(r"\d+", torch.__version__)[:2]) < (2, 1):
    pytest.skip(f"traced steps need torch 2.1 or newer, not {torch.__version__}", allow_module_level=True)

transformers = pytest.importorskip("transformers")


def _recorder():
    spec = importlib.util.spec_from_file_location("record_torch2", ROOT / "tools" / "record_torch2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def recorded_peak(make, keep_output=False):
    """The real step's peak: make() builds the model, batch and optimizer with the
    profiler's memory events on, and the third step is measured
    (tools/record_torch2.py's record_step, the corpus's own method)."""
    return _recorder().record_step(make, keep_output=keep_output)["peak_total"]


def tiny_llama(**extra):
    cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=172, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                   tie_word_embeddings=False, **extra)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg)


def batch(n=2, seq=32):
    ids = torch.randint(0, 512, (n, seq), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "labels": ids}


@pytest.mark.parametrize("checkpoint", [False, True])
def test_traced_step_is_the_real_steps_peak(checkpoint):
    def make():
        model = tiny_llama()
        model.train()
        if checkpoint:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return model, batch(), torch.optim.AdamW(model.parameters(), lr=1e-4)
    real = recorded_peak(make)
    model, inputs, optimizer = make()
    r = gpumem.torch.estimate(model, inputs, optimizer=optimizer, device="cpu")
    assert r.source == "traced"
    assert r.settings.device == "cpu"
    assert abs(r.allocated_peak_bytes / real - 1) < 0.01, (r.allocated_peak_bytes, real)


def test_a_loop_that_keeps_the_output_holds_the_logits_through_backward():
    def make():
        model = tiny_llama()
        return model, batch(), torch.optim.AdamW(model.parameters(), lr=1e-4)
    model, inputs, optimizer = make()
    dropped = gpumem.torch.estimate(model, inputs, optimizer=optimizer, device="cpu")
    kept = gpumem.torch.estimate(model, inputs, optimizer=optimizer, device="cpu", keep_output=True)
    logits = 2 * 32 * 512 * 4
    assert kept.allocated_peak_bytes == dropped.allocated_peak_bytes + logits
    real = recorded_peak(make, keep_output=True)
    assert abs(kept.allocated_peak_bytes / real - 1) < 0.01, (kept.allocated_peak_bytes, real)


def test_checkpointing_keeps_less_for_backward():
    inputs = batch(4, 64)
    plain = gpumem.torch.estimate(tiny_llama(), inputs, device="cpu")
    model = tiny_llama()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    kept = gpumem.torch.estimate(model, inputs, device="cpu")
    assert kept.allocated_peak_bytes < plain.allocated_peak_bytes


def test_cuda_runs_its_own_attention_kernels():
    """GPT-2 trains with attention dropout: the CPU falls back to the whole
    attention matrix, CUDA's memory-efficient kernel does not keep one."""
    cfg = transformers.GPT2Config(vocab_size=512, n_embd=64, n_layer=2, n_head=4, n_positions=256)
    with torch.device("meta"):
        model = transformers.GPT2LMHeadModel(cfg)  # tied lm_head and wte, on the meta device
    ids = torch.zeros(2, 256, dtype=torch.long, device="meta")
    matrix = 2 * 4 * 256 * 256 * 4  # batch x heads x T x T fp32
    cpu = gpumem.torch.estimate(model, dict(input_ids=ids, labels=ids), device="cpu", top=50)
    cuda = gpumem.torch.estimate(model, dict(input_ids=ids, labels=ids), device="cuda", top=50)
    assert any(t.bytes == matrix for t in cpu.largest_at_peak)
    assert not any(t.bytes >= matrix for t in cuda.largest_at_peak if "attn" in t.op)
    assert cuda.allocated_peak_bytes < cpu.allocated_peak_bytes
    assert cuda.parameters.trainable == sum(p.numel() for p in model.parameters())


def test_the_result_answers_as_the_command_line_does():
    r = gpumem.torch.estimate(tiny_llama(), batch(), gpu="1MiB")
    assert r.exit_code == 3 and not r.verdict.fits
    out = subprocess.run(r.command_line.replace("gpumem", CLI, 1), shell=True, capture_output=True, text=True)
    assert out.returncode == 3
    assert "DOES NOT FIT a GPU of 1.00 MiB" in out.stdout


def test_flags_that_reshape_the_step_are_refused():
    with pytest.raises(TypeError, match="batch= does not apply to a traced step"):
        gpumem.torch.estimate(tiny_llama(), batch(), batch=8)
    with pytest.raises(TypeError, match="method='export' takes positional"):
        gpumem.torch.estimate(tiny_llama(), batch(), method="export")


def test_a_model_that_reads_values_is_named():
    class Branchy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x):
            if x.sum() > 0:  # a branch on the input's values: read from the real input
                x = x * 2
            y = self.fc(x)
            if y.sum() > 0:  # a branch on what the weights computed: fake tensors have no values
                y = y * 2
            return y

    with pytest.raises(gpumem.torch.TraceError,
                       match=r"Branchy reads the values of a tensor computed from its weights .*test_torch_trace.py:\d+"):
        gpumem.torch.estimate(Branchy(), torch.randn(4, 8), labels=torch.zeros(4, dtype=torch.long))


def test_questions_on_the_inputs_values_are_answered_from_them():
    class Padded(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x, mask):
            if torch.all(mask == 1):  # transformers 4 drops an all-ones mask before SDPA
                return self.fc(x)
            return self.fc(x * mask)

    x, mask = torch.randn(4, 8), torch.ones(4, 8, dtype=torch.long)
    r = gpumem.torch.estimate(Padded(), (x, mask), labels=torch.zeros(4, dtype=torch.long), device="cpu")
    mask[0, 0] = 0
    padded = gpumem.torch.estimate(Padded(), (x, mask), labels=torch.zeros(4, dtype=torch.long), device="cpu")
    def forward(res):
        return next(p.allocated_bytes for p in res.phases if p.phase == "forward")
    assert forward(padded) == forward(r) + 4 * 8 * 4  # it took the other branch: x * mask
    assert mask[0, 0] == 0 and int(mask.sum()) == 31  # the user's tensor is left as it was


def test_frozen_parameters_get_no_gradients():
    model = tiny_llama()
    full = gpumem.torch.estimate(model, batch(), device="cpu")
    frozen = gpumem.torch.estimate(model, batch(), device="cpu", frozen=r"^model\.(embed_tokens|layers\.0)\.")
    assert frozen.parameters.frozen > 0
    assert frozen.parameters.trainable + frozen.parameters.frozen == full.parameters.trainable
    assert frozen.static_estimate_bytes < full.static_estimate_bytes


with contextlib.suppress(Exception):
    torch.set_num_threads(1)


def test_a_kernel_whose_workspace_fake_tensors_cannot_size_is_named():
    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(100, 16)
            self.rnn = torch.nn.LSTM(16, 32, batch_first=True)
            self.head = torch.nn.Linear(32, 100)

        def forward(self, ids):
            return self.head(self.rnn(self.embed(ids))[0]).flatten(0, 1)

    ids = torch.randint(0, 100, (2, 8))
    r = gpumem.torch.estimate(LM(), ids, labels=ids.flatten(), device="cpu")
    assert any("LSTM (oneDNN) keeps a workspace" in w for w in r.warnings), r.warnings


def test_precisions_change_what_the_step_holds():
    net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 10))
    x, y = torch.randn(32, 64), torch.zeros(32, dtype=torch.long)
    fp32 = gpumem.torch.estimate(net, x, labels=y, device="cpu")
    amp = gpumem.torch.estimate(net, x, labels=y, device="cpu", precision="amp-bf16")
    bf16 = gpumem.torch.estimate(net, x, labels=y, device="cpu", precision="bf16")
    assert bf16.settings.precision == "bf16"
    # Weights cast whole halve the weights and their states.
    assert abs(bf16.static_estimate_bytes * 2 - fp32.static_estimate_bytes) <= 4 * 4 * 2  # AdamW step counts stay fp32
    # Autocast keeps fp32 weights and adds their bf16 copies.
    assert amp.static_estimate_bytes == fp32.static_estimate_bytes
    def forward(res):
        return next(p.allocated_bytes for p in res.phases if p.phase == "forward")
    # bf16 copies of the weights beside bf16 activations: Linear(64, 256)'s copy
    # and its output alone differ from fp32's by a known amount.
    assert forward(amp) != forward(fp32)
    assert forward(bf16) < forward(fp32)
