"""The SGLang rollout engine against a loopback server speaking SGLang's HTTP API.

SGLang cannot run on this CPU-only machine, so these tests drive
:class:`SGLangServerEngine` against ``tests/support/sglang_loopback.py``: a real HTTP server on
127.0.0.1 that serves a real tiny HF model's sampling and log-probs in SGLang's answer
format (the one stand-in the project permits). The numbers are real: the log-probs the
engine returns are checked against the trainer's own recomputation.
"""

from __future__ import annotations

import copy
import socket

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from support.sglang_loopback import LoopbackSGLang  # noqa: E402

from agentgym_eppo.trainer.rollout.chat import Transcript  # noqa: E402
from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine  # noqa: E402
from agentgym_eppo.trainer.rollout.sglang import (  # noqa: E402
    EngineError,
    SamplingSettings,
    SGLangServerEngine,
    parse_generation,
)
from agentgym_eppo.trainer.training.batching import micro_batches, token_logprobs  # noqa: E402
from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer  # noqa: E402

pytestmark = pytest.mark.train
CONTEXTS = [[5, 6, 7, 8], [9, 10], [11, 12, 13, 14, 15, 16]]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(["Say apple. Call say with the word."] * 20, vocab_size=400)


@pytest.fixture
def model(tokenizer):
    torch.set_num_threads(1)
    return build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1, seed=0)


@pytest.fixture
def server(model, tokenizer):
    with LoopbackSGLang(
        copy.deepcopy(model), tokenizer.eos_token_id, tokenizer.pad_token_id
    ) as running:
        yield running


def _engine(server, tokenizer, tmp_path=None, **kwargs):
    return SGLangServerEngine(
        server.url, tokenizer.eos_token_id, sync_dir=tmp_path, timeout_s=30, **kwargs
    )


def _recomputed_logprobs(model, context, tokens, temperature):
    transcript = Transcript(list(context) + list(tokens), [0] * len(context) + [1] * len(tokens))
    batch = micro_batches([transcript], [0], 4096, 0)[0]
    with torch.no_grad():
        return token_logprobs(model, batch, temperature)[0]


def test_sampling_params_are_appendix_a_with_the_end_of_turn_token_kept(server, tokenizer):
    engine = _engine(server, tokenizer)
    engine.generate(CONTEXTS[:2], [7, 3], temperature=0.8)
    path, payload = server.requests[-1]
    assert path == "/generate"
    assert payload["input_ids"] == CONTEXTS[:2]
    assert payload["return_logprob"] is True
    assert payload["sampling_params"][0] == {
        "max_new_tokens": 7,
        "temperature": 0.8,
        "top_p": 1.0,
        "top_k": -1,
        "stop_token_ids": [tokenizer.eos_token_id],
        "skip_special_tokens": False,
        "no_stop_trim": True,
    }
    assert payload["sampling_params"][1]["max_new_tokens"] == 3


def test_sampled_turns_carry_the_log_probs_the_trainer_recomputes(server, model, tokenizer):
    engine = _engine(server, tokenizer)
    samples = engine.generate_samples(CONTEXTS, [6, 6, 6], temperature=0.8)
    assert [len(s.tokens) for s in samples] == [len(s.logprobs) for s in samples]
    for context, sample in zip(CONTEXTS, samples, strict=True):
        assert 1 <= len(sample.tokens) <= 6
        assert sample.finish_reason == (
            "stop" if sample.tokens[-1] == tokenizer.eos_token_id else "length"
        )
        expected = _recomputed_logprobs(model, context, sample.tokens, 0.8)
        assert torch.tensor(sample.logprobs) == pytest.approx(expected, abs=1e-4)
    assert engine.last_samples == []  # generate_samples does not touch the turn record
    tokens = engine.generate(CONTEXTS, [6, 6, 6], temperature=0.8)
    assert tokens == [s.tokens for s in engine.last_samples]


def test_greedy_turns_equal_the_in_process_hf_engine(server, model, tokenizer):
    hf = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id)
    engine = _engine(server, tokenizer)
    budgets = [5, 8, 3]
    assert engine.generate(CONTEXTS, budgets, 0.0) == hf.generate(CONTEXTS, budgets, 0.0)
    assert server.requests[-1][1]["sampling_params"][0]["top_k"] == 1


def test_weight_sync_loads_the_new_policy_and_flushes_the_cache(server, model, tokenizer, tmp_path):
    engine = _engine(server, tokenizer, tmp_path)
    before = engine.generate(CONTEXTS, [8, 8, 8], 0.0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.5)
    hf = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id)
    expected = hf.generate(CONTEXTS, [8, 8, 8], 0.0)
    assert expected != before  # the perturbation changes the greedy turns
    engine.update_weights(model)
    engine.update_weights(model)
    assert engine.generate(CONTEXTS, [8, 8, 8], 0.0) == expected
    loads = [payload for path, payload in server.requests if path == "/update_weights_from_disk"]
    assert [p["model_path"] for p in loads] == [str(tmp_path / "sync-1"), str(tmp_path / "sync-2")]
    assert server.flushes == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sync-2"]  # older syncs removed
    params = sum(p.numel() for p in model.parameters() if p is not model.lm_head.weight)
    assert engine.last_sync.syncs == 2
    assert engine.last_sync.bytes >= params * 4 and engine.last_sync.seconds > 0


def test_a_failed_weight_load_is_an_engine_error(server, model, tokenizer, tmp_path):
    engine = _engine(server, tokenizer, tmp_path)
    answer = engine._post("/update_weights_from_disk", {"model_path": str(tmp_path / "missing")})
    assert answer["success"] is False and "Failed to load" in answer["message"]
    server.hidden_paths = True  # the server's machine does not see the trainer's sync_dir
    with pytest.raises(EngineError, match=r"could not load the weights from .*sync-1"):
        engine.update_weights(model)
    assert server.flushes == 0
    with pytest.raises(EngineError, match="needs a sync_dir"):
        _engine(server, tokenizer).update_weights(model)


def test_unknown_paths_unreachable_and_silent_servers_are_engine_errors(tokenizer, server):
    engine = _engine(server, tokenizer)
    with pytest.raises(EngineError, match="answered HTTP 404"):
        engine._post("/no_such_endpoint")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(EngineError, match="unreachable on /generate"):
        SGLangServerEngine(f"http://127.0.0.1:{port}", 0).generate([[1]], [1], 0.0)
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(EngineError, match="unreachable on /generate"):
            SGLangServerEngine(url, 0, timeout_s=0.5).generate([[1]], [1], 0.0)


def test_bad_requests_and_answers_are_refused_clearly(server, tokenizer):
    engine = _engine(server, tokenizer)
    with pytest.raises(ValueError, match="one max_new_tokens per context"):
        engine.generate([[1], [2]], [3], 0.8)
    with pytest.raises(ValueError, match="at least one token"):
        engine.generate([[]], [3], 0.8)
    with pytest.raises(ValueError, match="max_new_tokens must be >= 1"):
        engine.generate([[1]], [0], 0.8)
    assert engine.generate([], [], 0.8) == []
    with pytest.raises(EngineError, match="was return_logprob sent"):
        parse_generation({"text": "hi", "meta_info": {}}, 2)
    with pytest.raises(EngineError, match="disagree"):
        parse_generation(
            {"output_ids": [5], "meta_info": {"output_token_logprobs": [[-0.1, 4, None]]}}, 2
        )
    with pytest.raises(EngineError, match="malformed"):
        parse_generation({"meta_info": {"output_token_logprobs": [["x"]]}}, 2)


def test_tokens_after_the_end_of_turn_are_dropped():
    item = {
        "meta_info": {
            "output_token_logprobs": [[-0.5, 7, None], [-0.25, 2, None], [-1.0, 9, None]],
            "finish_reason": {"type": "stop", "matched": 2},
        }
    }
    sample = parse_generation(item, eos_token_id=2)
    assert (sample.tokens, sample.logprobs, sample.finish_reason) == ([7, 2], [-0.5, -0.25], "stop")


def test_greedy_sampling_settings():
    params = SamplingSettings().to_sglang(4, 0.0, eos_token_id=3)
    assert (params["temperature"], params["top_k"], params["top_p"]) == (0.0, 1, 1.0)
