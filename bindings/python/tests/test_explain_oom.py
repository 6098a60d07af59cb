"""gpumem.explain_oom on real messages from public issues (tests/data/oom/messages.json cites each)."""

import json

import pytest

import gpumem
from conftest import ROOT, cli_json, differences

MESSAGES = json.loads((ROOT / "tests/data/oom/messages.json").read_text())["messages"]


@pytest.mark.parametrize("entry", MESSAGES, ids=[m["id"] for m in MESSAGES])
def test_each_public_message_reads_back_to_the_byte(entry):
    r = gpumem.explain_oom(entry["text"])
    for field, value in entry["expected"].items():
        if value is not None:  # null: the message does not say (the figure may still be derived)
            assert r[field] == value, field
    assert r.diagnosis in {"one huge request", "refused though free", "another process", "fragmentation",
                           "simply full", "driver"}
    assert r.advice and all(isinstance(a, str) for a in r.advice)
    assert differences(dict(r), cli_json("explain-oom", input=entry["text"])) == []


def test_free_memory_above_the_request_is_refused_though_free():
    # pytorch/pytorch#59778: 2.26 GiB asked, 3.03 GiB free.
    entry = next(m for m in MESSAGES if m["id"] == "pytorch59778")
    r = gpumem.explain_oom(entry["text"])
    assert r.diagnosis == "refused though free"
    assert any("set_per_process_memory_fraction" in a for a in r.advice)


def test_an_exception_object_is_read_like_its_text():
    text = MESSAGES[0]["text"]
    from_exception = gpumem.explain_oom(RuntimeError(text))
    assert dict(from_exception) == dict(gpumem.explain_oom(text))
    assert "Diagnosis" in str(from_exception)


def test_text_without_a_message_is_an_input_error():
    with pytest.raises(gpumem.InputError, match="no PyTorch or CUDA out-of-memory message"):
        gpumem.explain_oom("Traceback: ValueError: shapes do not match")
    with pytest.raises(gpumem.InputError, match="empty"):
        gpumem.explain_oom("")
