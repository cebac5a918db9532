"""Micro-batches and the forward that scores them: pieces, the causal kernel, equal log-probs."""

from __future__ import annotations

import itertools
import random

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from agentgym_eppo.trainer.rollout.chat import Transcript  # noqa: E402
from agentgym_eppo.trainer.training.batching import (  # noqa: E402
    FORWARD_TOKENS,
    micro_batches,
    plan_pieces,
    token_logprobs,
)
from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)
    tokenizer = build_tokenizer(["Say apple. Call say with the word."] * 20, vocab_size=400)
    return build_tiny_model(tokenizer, hidden_size=32, layers=2, heads=2, kv_heads=1)


def _transcripts(lengths, seed=0):
    rng = random.Random(seed)
    out = []
    for length in lengths:
        tokens = [rng.randrange(5, 280) for _ in range(length)]
        mask = [0] * (length // 3) + [rng.random() < 0.7 for _ in range(length - length // 3)]
        out.append(Transcript(tokens, [int(m) for m in mask]))
    return out


def _cost(lengths, pieces, forward_tokens):
    return sum(len(p) * max(lengths[i] for i in p) + forward_tokens for p in pieces)


@pytest.mark.parametrize("seed", range(20))
def test_pieces_are_the_cheapest_split_into_runs_of_neighbouring_rows(seed):
    rng = random.Random(seed)
    lengths = sorted(
        rng.choice([rng.randrange(20, 200), rng.randrange(900, 3000)]) for _ in range(7)
    )
    pieces = plan_pieces(lengths, forward_tokens=64)
    assert [i for p in pieces for i in p] == list(range(len(lengths)))  # every row, in order
    best = min(
        _cost(lengths, [range(a, b) for a, b in itertools.pairwise((0, *cuts, len(lengths)))], 64)
        for k in range(len(lengths))
        for cuts in itertools.combinations(range(1, len(lengths)), k)
    )
    assert _cost(lengths, pieces, 64) == best


def test_a_micro_batch_of_mixed_lengths_scores_as_each_transcript_alone(model):
    transcripts = _transcripts([9, 12, 14, 150, 160])
    batch = micro_batches(transcripts, list(range(5)), 4096, 0)[0]
    assert len(plan_pieces(batch.attention_mask.sum(1).tolist(), FORWARD_TOKENS)) == 2
    alone = [token_logprobs(model, micro_batches([t], [0], 4096, 0)[0]) for t in transcripts]
    with torch.no_grad():
        for forward_tokens in (None, FORWARD_TOKENS):
            logp, entropy = token_logprobs(model, batch, forward_tokens=forward_tokens)
            order = [batch.members.index(i) for i in range(5)]
            owners = batch.member_of_token
            for index, (logp_alone, entropy_alone) in enumerate(alone):
                mine = owners == order[index]
                torch.testing.assert_close(logp[mine], logp_alone, rtol=0, atol=1e-5)
                torch.testing.assert_close(entropy[mine], entropy_alone, rtol=0, atol=1e-5)


def test_gradients_through_pieces_equal_those_of_one_padded_forward(model):
    batch = micro_batches(_transcripts([9, 12, 150, 160], seed=1), list(range(4)), 4096, 0)[0]

    def gradient(forward_tokens):
        model.zero_grad(set_to_none=True)
        logp, _ = token_logprobs(model, batch, forward_tokens=forward_tokens)
        logp.sum().backward()
        return [p.grad.clone() for p in model.parameters()]

    for one, pieced in zip(gradient(None), gradient(FORWARD_TOKENS), strict=True):
        torch.testing.assert_close(pieced, one, rtol=1e-4, atol=1e-5)
    model.zero_grad(set_to_none=True)


class _Attention(TorchDispatchMode):
    """Records every attention kernel call: its query length, causal flag and mask."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if "scaled_dot_product" in func.__name__ and "backward" not in func.__name__:
            named = dict(zip([a.name for a in func._schema.arguments], args, strict=False))
            named.update(kwargs)
            mask = named.get("attn_mask")
            self.calls.append((args[0].shape[-2], bool(named.get("is_causal")), mask is None))
        return func(*args, **kwargs)


def test_padded_rows_run_the_causal_kernel_without_a_mask_one_forward_per_piece(model):
    batch = micro_batches(_transcripts([9, 12, 150, 160]), list(range(4)), 4096, 0)[0]
    with _Attention() as seen, torch.no_grad():
        token_logprobs(model, batch, forward_tokens=FORWARD_TOKENS)
    layers = model.config.num_hidden_layers
    # the two short rows padded to 12, the two long ones to 160; never a mask tensor
    assert seen.calls == [(12, True, True)] * layers + [(160, True, True)] * layers
