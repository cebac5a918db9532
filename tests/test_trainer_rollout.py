"""Multi-turn rollouts through MultiTaskVectorEnv: token-in/token-out layout, masks, limits."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from support import trainer_test_envs  # noqa: E402, F401  (registers the test tasks)

from agentgym_eppo.core import Status  # noqa: E402
from agentgym_eppo.trainer.algorithms.clip_policies import FixedClip  # noqa: E402
from agentgym_eppo.trainer.rollout.chat import (  # noqa: E402
    Transcript,
    action_text,
    observation_token_ids,
)
from agentgym_eppo.trainer.rollout.episodes import (  # noqa: E402
    RolloutLimits,
    TurnScores,
    play_episodes,
    slot_info,
    start_episode,
)
from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine  # noqa: E402
from agentgym_eppo.trainer.rollout.stale import SnapshotHFEngine, StaleMixEngine  # noqa: E402
from agentgym_eppo.trainer.training.batching import micro_batches, token_logprobs  # noqa: E402
from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer  # noqa: E402
from agentgym_eppo.trainer.training.update import PolicyUpdater, UpdateSettings  # noqa: E402
from agentgym_eppo.vector import MultiTaskVectorEnv  # noqa: E402

pytestmark = pytest.mark.train
LOOKUP = "support.trainer_test_envs:Lookup-v0"


class ExpertReplayEngine:
    """A rollout engine that writes the expert's turn (asks the env for it): a stand-in
    policy that plays perfectly, so the rollout's bookkeeping can be checked exactly."""

    def __init__(self, venv, tokenizer, cut_after=None):
        self.venv, self.tokenizer, self.cut_after = venv, tokenizer, cut_after
        self.contexts = []

    def generate(self, contexts, max_new_tokens, temperature):
        self.contexts.append([list(c) for c in contexts])
        running = [i for i in range(self.venv.num_envs) if self.venv.running[i]]
        actions = self.venv.call_some(running, "expert_action")
        outputs = []
        for action, budget in zip(actions, max_new_tokens, strict=True):
            ids = self.tokenizer.encode(
                action_text(action) + "<|im_end|>", add_special_tokens=False
            )
            outputs.append(ids[: min(budget, self.cut_after or budget)])
        return outputs

    def update_weights(self, model):
        pass


@pytest.fixture(scope="module")
def tokenizer():
    texts = ["Open the box, then say its word.", '{"name": "open", "arguments": {"box": "box1"}}']
    return build_tokenizer(texts * 20, vocab_size=400)


@pytest.fixture
def venv():
    env = MultiTaskVectorEnv({LOOKUP: 2}, group_size=2, backend="serial", seed=0)
    yield env
    env.close()


def _start(venv, tokenizer):
    observations, infos = venv.reset(seed=0)
    return [
        start_episode(tokenizer, i, observations[i], slot_info(infos, i))
        for i in range(venv.num_envs)
    ]


def test_episode_is_prompt_then_sampled_tokens_then_env_reply_tokens(venv, tokenizer):
    episodes = _start(venv, tokenizer)
    prompt = list(episodes[0].transcript.tokens)
    engine = ExpertReplayEngine(venv, tokenizer)
    play_episodes(venv, episodes, engine, tokenizer, RolloutLimits(64, 4096, 0.8))
    episode = episodes[0]
    assert episode.status == "completed" and episode.success and episode.reward == 1.0
    assert episode.turns == 2
    assert episode.group == episodes[1].group  # one GRPO group, one instance
    record = venv.trajectory(0)
    word = record[1]["observation"]
    open_turn = tokenizer.encode(str(record[1]["action"]) + "<|im_end|>", add_special_tokens=False)
    say_turn = tokenizer.encode(str(record[2]["action"]) + "<|im_end|>", add_special_tokens=False)
    reply = observation_token_ids(tokenizer, word)
    expected = prompt + open_turn + reply + say_turn
    assert episode.transcript.tokens == expected
    assert episode.transcript.mask == [0] * len(prompt) + [1] * len(open_turn) + [0] * len(
        reply
    ) + [1] * len(say_turn)
    # the second turn was generated from exactly the tokens of the first (never re-tokenized)
    assert engine.contexts[1][0] == prompt + open_turn + reply


def test_context_overflow_ends_the_episode_as_agent_context_limit(venv, tokenizer):
    episodes = _start(venv, tokenizer)
    prompt_length = len(episodes[0].transcript)
    engine = ExpertReplayEngine(venv, tokenizer)
    # room for the first turn, not for the reply and a second turn
    play_episodes(venv, episodes, engine, tokenizer, RolloutLimits(64, prompt_length + 30, 0.8))
    for episode in episodes:
        assert episode.status == Status.AGENT_CONTEXT_LIMIT.value
        assert episode.reward == pytest.approx(-0.2)
        assert len(episode.transcript) <= prompt_length + 30


def test_a_turn_cut_by_the_token_limit_is_closed_with_a_template_token(venv, tokenizer):
    episodes = _start(venv, tokenizer)
    prompt_length = len(episodes[0].transcript)
    engine = ExpertReplayEngine(venv, tokenizer, cut_after=3)
    play_episodes(venv, episodes, engine, tokenizer, RolloutLimits(3, 4096, 0.8))
    episode = episodes[0]
    assert episode.status == Status.AGENT_INVALID_ACTION.value
    assert episode.transcript.mask[prompt_length:] == [1, 1, 1, 0]
    assert episode.transcript.tokens[-1] == tokenizer.eos_token_id


def test_hf_engine_respects_each_rows_budget_and_stops_at_end_of_turn(tokenizer):
    torch.set_num_threads(1)
    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1, seed=2)
    engine = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id, batch_size=2)
    contexts = [[5, 6, 7], [5], [9, 9, 9, 9]]
    outputs = engine.generate(contexts, [4, 1, 2], temperature=0.8)
    assert [len(o) <= b for o, b in zip(outputs, [4, 1, 2], strict=True)] == [True] * 3
    # all-zero logits: greedy picks token 0; call that the end-of-turn token
    untied = build_tiny_model(
        tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1, tie_word_embeddings=False
    )
    with torch.no_grad():
        untied.lm_head.weight.zero_()
    stopping = HFGenerateEngine(untied, eos_token_id=0, pad_token_id=tokenizer.pad_token_id)
    assert stopping.generate(contexts, [4, 1, 2], temperature=0.0) == [[0], [0], [0]]


def test_hf_engine_greedy_is_deterministic_and_sampling_is_seeded(tokenizer):
    torch.set_num_threads(1)
    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1, seed=1)
    engine = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id)
    contexts = [[5, 6, 7, 8], [9, 10]]
    assert engine.generate(contexts, [6, 6], 0.0) == engine.generate(contexts, [6, 6], 0.0)
    torch.manual_seed(3)
    first = engine.generate(contexts, [6, 3], 0.8)
    torch.manual_seed(3)
    assert engine.generate(contexts, [6, 3], 0.8) == first
    assert len(first[1]) <= 3


def _plain_greedy(model, tokenizer, context, budget):
    """``transformers``' own greedy ``generate`` on one context, cut at the end of turn."""
    out = model.generate(
        input_ids=torch.tensor([context]),
        max_new_tokens=budget,
        do_sample=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    row = out[0, len(context) :].tolist()
    return row[: row.index(tokenizer.eos_token_id) + 1] if tokenizer.eos_token_id in row else row


def test_hf_engine_reuses_each_episodes_cache_and_matches_plain_generate(tokenizer):
    """Three turns of four contexts (two identical, lengths differ): greedy turns equal
    ``generate``'s on the whole conversation, only the new tokens are prefilled, and the
    identical contexts are prefilled once."""
    torch.set_num_threads(1)
    model = build_tiny_model(tokenizer, hidden_size=64, layers=2, heads=4, kv_heads=2, seed=5)
    engine = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id, batch_size=3)
    contexts = [[5, 6, 7, 8], [5, 6, 7, 8], [9, 10], [11] * 13]
    observation = [12, 13, 14]
    for turn in range(3):
        budgets = [6, 6, 2, 6] if turn == 1 else [6, 6, 6, 6]
        before = dict(engine.stats)
        outputs = engine.generate(contexts, budgets, temperature=0.0)
        expected = [
            _plain_greedy(model, tokenizer, c, b) for c, b in zip(contexts, budgets, strict=True)
        ]
        assert outputs == expected
        distinct = {tuple(c) for c in contexts}
        assert len(distinct) == 3  # greedy keeps the two identical ones identical
        # turn 0: every distinct context in full; later: its last sampled token and the
        # observation, on top of the cache kept from the turn before
        fresh = sum(len(c) for c in distinct) if turn == 0 else len(distinct) * (1 + 3)
        new = engine.stats["prefilled_tokens"] - before["prefilled_tokens"]
        reused = engine.stats["reused_tokens"] - before["reused_tokens"]
        assert (new, reused) == (fresh, sum(len(c) for c in distinct) - fresh)
        contexts = [c + o + observation for c, o in zip(contexts, outputs, strict=True)]


def test_hf_engine_drops_its_caches_when_the_weights_change(tokenizer):
    torch.set_num_threads(1)
    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1, seed=4)
    engine = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id)
    first = engine.generate([[5, 6, 7]], [3], temperature=0.0)[0]
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(1.5)  # an optimizer step changes them in place
    context = [5, 6, 7, *first, 8]
    before = engine.stats["reused_tokens"]
    assert engine.generate([context], [3], 0.0) == [_plain_greedy(model, tokenizer, context, 3)]
    assert engine.stats["reused_tokens"] == before


def test_hf_engine_in_bf16_decodes_with_a_bf16_copy_renewed_when_the_weights_change(tokenizer):
    torch.set_num_threads(1)
    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1, seed=4)
    engine = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id, bf16=True)
    first = engine.generate([[5, 6, 7]], [3], temperature=0.0)[0]
    copy_of_weights = engine._shadow
    assert copy_of_weights is not None and copy_of_weights.dtype == torch.bfloat16
    assert next(model.parameters()).dtype == torch.float32  # the trained weights stay fp32
    engine.generate([[5, 6, 7, *first, 8]], [3], temperature=0.0)
    assert engine._shadow is copy_of_weights and engine.stats["reused_tokens"] > 0
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(1.5)
    engine.generate([[5, 6, 7]], [3], temperature=0.0)
    assert engine._shadow is not copy_of_weights


def test_hf_engine_degenerate_requests(tokenizer):
    """An empty context is refused, a zero budget gives an empty turn (and no decoding),
    mismatched lengths are refused, and a one-token context decodes."""
    torch.set_num_threads(1)
    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1, seed=4)
    engine = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id)
    with pytest.raises(ValueError, match="at least one token"):
        engine.generate([[5], []], [2, 2], 0.0)
    with pytest.raises(ValueError, match="one max_new_tokens per context"):
        engine.generate([[5]], [2, 2], 0.0)
    outputs = engine.generate([[5, 6], [7]], [0, 3], 0.0)
    assert outputs[0] == [] and 1 <= len(outputs[1]) <= 3
    assert engine.stats["prefilled_tokens"] == 1  # the zero-budget context was not run


def _played(tokenizer, engine_of, temperature=0.8, slots=4):
    """A seeded rollout of a random tiny model on Lookup (its first turn, never a valid
    call, ends each episode)."""
    torch.set_num_threads(1)
    model = build_tiny_model(tokenizer, hidden_size=32, layers=2, heads=2, kv_heads=1, seed=6)
    env = MultiTaskVectorEnv({LOOKUP: slots}, group_size=2, backend="serial", seed=0)
    try:
        episodes = _start(env, tokenizer)
        torch.manual_seed(0)
        limits = RolloutLimits(24, 1024, temperature)
        play_episodes(env, episodes, engine_of(model), tokenizer, limits)
    finally:
        env.close()
    return model, episodes


def _updater(model, tokenizer, old_logprobs):
    return PolicyUpdater(
        model,
        torch.optim.AdamW(model.parameters(), lr=1e-3),
        FixedClip(),
        UpdateSettings(kl_coef=0.0, temperature=0.8, mini_batches=2, old_logprobs=old_logprobs),
        pad_token_id=tokenizer.pad_token_id,
    )


def test_hf_engine_scores_each_sampled_token_as_a_scoring_forward_does(tokenizer):
    """Three turns of four contexts of different lengths, three rows a batch, later turns
    on reused caches: each sampled token's reported log-prob and entropy equal those of
    the whole conversation scored in one forward, within float error."""
    torch.set_num_threads(1)
    model = build_tiny_model(tokenizer, hidden_size=64, layers=2, heads=4, kv_heads=2, seed=5)
    engine = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id, batch_size=3)
    transcripts = [Transcript(c) for c in ([5, 6, 7, 8], [5, 6, 7, 8], [9, 10], [11] * 13)]
    reported = [TurnScores() for _ in transcripts]
    torch.manual_seed(0)
    for _ in range(3):
        outputs = engine.generate([t.tokens for t in transcripts], [6] * 4, temperature=0.8)
        for transcript, output, score, total in zip(
            transcripts, outputs, engine.sampled_scores(), reported, strict=True
        ):
            assert len(score.logprobs) == len(score.entropy) == len(output)
            transcript.add_generated(output)
            transcript.add_template([12, 13, 14])
            total.logprobs.extend(score.logprobs)
            total.entropy.extend(score.entropy)
    assert engine.stats["reused_tokens"] > 0
    for transcript, total in zip(transcripts, reported, strict=True):
        with torch.no_grad():
            logp, entropy = token_logprobs(model, micro_batches([transcript], [0], 4096, 0)[0], 0.8)
        torch.testing.assert_close(torch.tensor(total.logprobs), logp, rtol=0, atol=1e-5)
        torch.testing.assert_close(torch.tensor(total.entropy), entropy, rtol=0, atol=1e-5)
    assert engine.generate([[5, 6]], [3], temperature=0.0) and engine.sampled_scores() == [
        TurnScores()
    ]  # greedy: no distribution to report


def test_the_engines_scores_of_a_rollout_are_the_rescored_old_policy(tokenizer):
    """On a rollout through the environments, the update's old log-probs and entropy
    from the engine's scores equal a scoring forward's, and an update from either gives
    the same weights."""

    def engine(model):  # three rows a batch: the fourth slot decodes in a batch of its own
        return HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id, 3)

    model, episodes = _played(tokenizer, engine)
    assert all(e.behaviour_scores() is not None for e in episodes)
    for i, episode in enumerate(episodes):
        episode.reward = float(i % 2)
    bypass = _updater(model, tokenizer, "rollout").score(episodes)
    decoupled = _updater(model, tokenizer, "rescore").score(episodes)
    assert (bypass.rescored, decoupled.rescored) == (0, len(episodes))
    pairs = zip(
        bypass.old_logprobs + bypass.entropy,
        decoupled.old_logprobs + decoupled.entropy,
        strict=True,
    )
    for a, b in pairs:
        assert a.numel() > 0
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
    weights = {}
    for source in ("rollout", "rescore"):
        trained = copy.deepcopy(model)
        _updater(trained, tokenizer, source).step(episodes, torch.Generator().manual_seed(0))
        weights[source] = trained.state_dict()
    for name, value in weights["rescore"].items():
        torch.testing.assert_close(weights["rollout"][name], value, rtol=0, atol=1e-5)
        assert not torch.equal(value, model.state_dict()[name]) or "norm" in name


def test_episodes_without_the_engines_scores_are_rescored(tokenizer):
    """A stale-mix engine reports no scores (its turns may come from lagging weights) and
    a greedy turn has none: those episodes' old log-probs come from a scoring forward."""

    def stale_mix(model):
        fresh = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id)
        stale = SnapshotHFEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id)
        return StaleMixEngine(fresh, stale, stale_share=0.5, stale_every=2)

    def greedy(model):
        return HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id)

    for engine_of, temperature in ((stale_mix, 0.8), (greedy, 0.0)):
        model, episodes = _played(tokenizer, engine_of, temperature, slots=2)
        assert [e.behaviour_scores() for e in episodes] == [None, None]
        assert _updater(model, tokenizer, "rollout").score(episodes).rescored == 2
