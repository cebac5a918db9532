"""The training loop: policy update, SFT warm start, exact resume, config, metrics, CLI."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from support import trainer_test_envs  # noqa: E402, F401  (registers the test tasks)

from agentgym_eppo.trainer.algorithms.clip_policies import EPPOClip, FixedClip  # noqa: E402
from agentgym_eppo.trainer.algorithms.defaults import HELD_OUT_AVERAGE_CHOICES  # noqa: E402
from agentgym_eppo.trainer.algorithms.pacer import EPPOPacer  # noqa: E402
from agentgym_eppo.trainer.cli import main as cli_main  # noqa: E402
from agentgym_eppo.trainer.config import load_config  # noqa: E402
from agentgym_eppo.trainer.rollout.chat import Transcript  # noqa: E402
from agentgym_eppo.trainer.rollout.episodes import Episode  # noqa: E402
from agentgym_eppo.trainer.run import run_training  # noqa: E402
from agentgym_eppo.trainer.training.batching import micro_batches, token_logprobs  # noqa: E402
from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer  # noqa: E402
from agentgym_eppo.trainer.training.sft import (  # noqa: E402
    HELD_OUT_AVERAGES,
    EarlyStop,
    ExpertEpisode,
    expert_transcript,
    held_out_sums,
    record_expert_episodes,
    sft_lr_factor,
    sft_train,
    split_held_out,
    warmup_factor,
)
from agentgym_eppo.trainer.training.update import PolicyUpdater, UpdateSettings  # noqa: E402

pytestmark = pytest.mark.train
TASKS = "{support.trainer_test_envs:Echo-v0: 4, support.trainer_test_envs:Lookup-v0: 4}"


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(["Say apple. Call say with the word."] * 20, vocab_size=400)


def _model(tokenizer, seed=0):
    torch.set_num_threads(1)
    return build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1, seed=seed)


def _episode(task, group, tokens, mask, reward):
    return Episode(0, task, group, "s", Transcript(list(tokens), list(mask)), reward=reward)


def _mean_logprob(model, transcript):
    batch = micro_batches([transcript], [0], 4096, 0)[0]
    with torch.no_grad():
        return float(token_logprobs(model, batch)[0].mean())


def test_update_makes_the_rewarded_episode_likelier_and_the_punished_one_less(tokenizer):
    model = _model(tokenizer)
    good = _episode("echo", "g", [5, 6, 7, 8, 9], [0, 0, 1, 1, 1], reward=1.0)
    bad = _episode("echo", "g", [5, 6, 10, 11, 12], [0, 0, 1, 1, 1], reward=-0.2)
    before = (_mean_logprob(model, good.transcript), _mean_logprob(model, bad.transcript))
    updater = PolicyUpdater(
        model,
        torch.optim.AdamW(model.parameters(), lr=1e-2),
        FixedClip(),
        UpdateSettings(kl_coef=0.0, temperature=1.0),
        pad_token_id=0,
    )
    result = updater.step([good, bad], torch.Generator().manual_seed(0))
    assert result.advantages == pytest.approx([1.0, -1.0], abs=1e-5)
    assert result.tokens == 6 and result.task_tokens == {"echo": 6}
    assert result.task_clip_eps == {"echo": 0.2}
    assert _mean_logprob(model, good.transcript) > before[0]
    assert _mean_logprob(model, bad.transcript) < before[1]


def test_eppo_update_reports_paced_clip_ranges_and_clips_off_policy_mini_batches(tokenizer):
    model = _model(tokenizer)
    episodes = [
        _episode(task, f"{task}:{k // 2}", [5, 6, 7 + k, 8, 9 + k], [0, 0, 1, 1, 1], reward=k % 2)
        for task in ("echo", "lookup")
        for k in range(4)
    ]
    updater = PolicyUpdater(
        model,
        torch.optim.AdamW(model.parameters(), lr=0.5),
        EPPOClip(EPPOPacer()),
        UpdateSettings(kl_coef=1e-4, temperature=1.0, mini_batches=4, ppo_epochs=2),
        pad_token_id=0,
        ref_model=_model(tokenizer),
    )
    first = updater.step(episodes, torch.Generator().manual_seed(0))
    assert first.task_clip_eps == {"echo": 0.2, "lookup": 0.2}  # first measurement: eps0
    assert set(first.task_entropy) == {"echo", "lookup"}
    # with a huge learning rate later mini-batches are far off-policy: the clip bites
    assert max(first.task_clipped_share.values()) > 0
    for task, share in first.task_clipped_share.items():
        assert share <= first.task_ratio_outside_share[task]
    second = updater.step(episodes, torch.Generator().manual_seed(1))
    assert all(0.15 <= eps <= 0.3 for eps in second.task_clip_eps.values())


def _mixed_episodes():
    """``echo`` groups whose rewards differ, ``lookup`` groups that all ended alike."""
    return [
        _episode(task, f"{task}:{k // 2}", [5, 6, 7 + k, 8, 9 + k], [0, 0, 1, 1, 1], reward=r)
        for task in ("echo", "lookup")
        for k in range(4)
        for r in [k % 2 if task == "echo" else 0.0]
    ]


def _skip_step(tokenizer, skip: bool, kl_coef: float):
    model = _model(tokenizer)
    updater = PolicyUpdater(
        model,
        torch.optim.AdamW(model.parameters(), lr=1e-2),
        FixedClip(),
        UpdateSettings(kl_coef=kl_coef, temperature=1.0, mini_batches=2, skip_zero_advantage=skip),
        pad_token_id=0,
        ref_model=_model(tokenizer, seed=1),
    )
    forwarded: list[int] = []
    forward = updater._forward
    updater._forward = lambda batch: (forwarded.extend(batch.members), forward(batch))[1]
    result = updater.step(_mixed_episodes(), torch.Generator().manual_seed(0))
    return updater, result, forwarded


@pytest.mark.parametrize("skip", [False, True], ids=["all-trained", "zero-advantage-skipped"])
def test_the_update_counts_the_work_of_the_passes_it_ran(tokenizer, skip):
    """``update_gflop``: one scoring forward of every episode, one reference forward and
    (forward + backward) x epochs of each trained one; 8 episodes of 5 tokens, 4 of them
    with a nonzero advantage."""
    from agentgym_eppo.trainer.training.flops import forward_flops

    _, result = _skip_step(tokenizer, skip=skip, kl_coef=0.5)[:2]
    model = _model(tokenizer)
    one = forward_flops(sum(p.numel() for p in model.parameters()), 1, 32, [5])
    trained = 4 if skip else 8
    epochs = UpdateSettings().ppo_epochs
    assert result.gflop * 1e9 == pytest.approx(one * (8 + trained + 3 * epochs * trained))


@pytest.mark.parametrize("over", ["all", "mixed_groups"])
def test_task_norm_over_decides_what_an_equal_reward_group_gets(tokenizer, over):
    # one task: a mixed group whose failure is the longer episode, and a group that
    # failed alike; eq. 4 over every episode pushes the failed group up
    short, long = ([5, 6, 7, 8], [0, 0, 1, 1]), ([5, 6, 7, 8, 9, 10, 11], [0, 0, 1, 1, 1, 1, 1])
    episodes = [
        _episode("echo", "g0", *short, reward=1.0),
        _episode("echo", "g0", *long, reward=0.0),
        _episode("echo", "g1", *long, reward=0.0),
        _episode("echo", "g1", *long, reward=0.0),
    ]
    model = _model(tokenizer)
    updater = PolicyUpdater(
        model,
        torch.optim.AdamW(model.parameters(), lr=1e-2),
        FixedClip(),
        UpdateSettings(kl_coef=0.0, temperature=1.0, task_norm_over=over),
        pad_token_id=0,
    )
    advantages = updater.advantages(episodes).tolist()
    if over == "all":
        assert advantages[2] == advantages[3] > 0.1
    else:
        assert advantages[2:] == [0.0, 0.0] and advantages[0] > 0 > advantages[1]
    with pytest.raises(ValueError, match="task_norm_over"):
        UpdateSettings(task_norm_over="mixed")
    with pytest.raises(ValueError, match=r"algorithm\.task_norm_over"):
        load_config(None, ["algorithm.task_norm_over=mixed"])


def test_skipping_zero_advantage_episodes_changes_only_their_kl_term(tokenizer):
    full, full_result, full_forwarded = _skip_step(tokenizer, skip=False, kl_coef=0.0)
    skip, skip_result, skip_forwarded = _skip_step(tokenizer, skip=True, kl_coef=0.0)
    assert skip_result.advantages == full_result.advantages
    assert skip_result.advantages[4:] == [0.0] * 4  # lookup: every group ended alike
    assert sorted(full_forwarded) == list(range(8)) and sorted(skip_forwarded) == [0, 1, 2, 3]
    assert skip_result.task_entropy == full_result.task_entropy  # the pacer sees every task
    for name, value in full.model.state_dict().items():
        torch.testing.assert_close(skip.model.state_dict()[name], value, rtol=1e-4, atol=1e-5)
    # with the KL term on, the update differs, and the reference scores only trained episodes
    with_kl, _, _ = _skip_step(tokenizer, skip=True, kl_coef=0.5)
    scored = with_kl.score(_mixed_episodes(), trained=[0, 1, 2, 3])
    assert scored.ref_logprobs is not None
    assert [t.numel() for t in scored.ref_logprobs] == [3] * 4 + [0] * 4
    full_kl, _, _ = _skip_step(tokenizer, skip=False, kl_coef=0.5)
    assert (
        max(
            float((full_kl.model.state_dict()[n] - v).abs().max())
            for n, v in with_kl.model.state_dict().items()
        )
        > 1e-3
    )


def test_the_reference_scores_the_policys_micro_batches_when_every_episode_is_trained(
    tokenizer, monkeypatch
):
    from agentgym_eppo.trainer.training import update

    built: list[list[int]] = []
    build = update.micro_batches
    monkeypatch.setattr(
        update,
        "micro_batches",
        lambda t, indices, *a: (built.append(list(indices)), build(t, indices, *a))[1],
    )
    updater, _, _ = _skip_step(tokenizer, skip=False, kl_coef=0.5)
    built.clear()
    episodes = _mixed_episodes()
    everyone = updater.score(episodes, trained=list(range(8)))
    assert built == [list(range(8))]  # one build serves the policy and the reference
    assert everyone.ref_logprobs is not None and all(t.numel() == 3 for t in everyone.ref_logprobs)
    built.clear()
    updater.score(episodes, trained=[0, 1, 2, 3])
    assert built == [list(range(8)), [0, 1, 2, 3]]
    built.clear()  # an episode without loss tokens is in no batch and needs no second build
    silent = _episode("echo", "echo:0", [5, 6], [0, 0], reward=0.0)
    scored = updater.score([*episodes, silent], trained=list(range(8)))
    assert built == [list(range(8))]
    assert scored.ref_logprobs is not None and scored.ref_logprobs[8].numel() == 0
    assert scored.old_logprobs[8].numel() == 0 and scored.entropy[8].numel() == 0


def test_a_step_whose_advantages_are_all_zero_leaves_the_weights_alone_when_skipping(tokenizer):
    model = _model(tokenizer)
    before = {name: value.clone() for name, value in model.state_dict().items()}
    updater = PolicyUpdater(
        model,
        torch.optim.AdamW(model.parameters(), lr=1e-2),
        FixedClip(),
        UpdateSettings(kl_coef=0.5, temperature=1.0, skip_zero_advantage=True),
        pad_token_id=0,
        ref_model=_model(tokenizer, seed=1),
    )
    alike = [e for e in _mixed_episodes() if e.task_id == "lookup"]
    result = updater.step(alike, torch.Generator().manual_seed(0))
    assert result.advantages == [0.0] * 4
    assert (result.loss, result.kl, result.grad_norm) == (0.0, 0.0, 0.0)
    assert result.task_entropy.keys() == {"lookup"}  # the pacer still measures the task
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), name


def test_expert_transcript_trains_only_on_the_experts_turns(tokenizer):
    episode = ExpertEpisode(
        "lookup",
        "train-0",
        "Open the box.",
        [],
        "The word is in box1.",
        actions=[
            '<tool_call>\n{"name": "open", "arguments": {"box": "box1"}}\n</tool_call>',
            "say",
        ],
        observations=["apple", "right"],
    )
    transcript = expert_transcript(tokenizer, episode)
    written = [t for t, m in zip(transcript.tokens, transcript.mask, strict=True) if m]
    assert tokenizer.decode(written) == episode.actions[0] + "<|im_end|>say<|im_end|>"
    assert "<tool_response>\napple\n</tool_response>" in tokenizer.decode(transcript.tokens)
    assert "right" not in tokenizer.decode(transcript.tokens)  # the last reply ends the episode


def test_expert_episodes_can_be_counted_per_task():
    from agentgym_eppo.vector import MultiTaskVectorEnv

    venv = MultiTaskVectorEnv(
        {"support.trainer_test_envs:Echo-v0": 2, "support.trainer_test_envs:Lookup-v0": 2},
        group_size=1,
        backend="serial",
    )
    replayed: list[int] = []
    reset_some = venv.reset_some

    def spy(indices):
        replayed.extend(indices)
        return reset_some(indices)

    venv.reset_some = spy
    try:
        episodes = record_expert_episodes(venv, {"echo": 1, "lookup": 5})
        assert sorted(e.task_id for e in episodes) == ["echo"] + ["lookup"] * 5
        assert all(e.success for e in episodes)
        # echo's quota is met in the first round: only lookup's slots play again
        assert replayed and {venv.task_ids[i] for i in replayed} == {"lookup"}
        with pytest.raises(ValueError, match=r"counts are for tasks \['echo'\]"):
            record_expert_episodes(venv, {"echo": 1})
    finally:
        venv.close()


def test_sft_lowers_the_loss_on_expert_turns(tokenizer):
    model = _model(tokenizer)
    transcripts = [Transcript([5, 6, 7, 8, 9, 10], [0, 0, 1, 1, 1, 1]) for _ in range(4)]
    losses = sft_train(
        model,
        transcripts,
        epochs=10,
        lr=1e-2,
        batch_episodes=4,
        micro_batch_tokens=64,
        pad_token_id=0,
    )
    assert len(losses) == 10
    assert losses[-1] < losses[0] / 2


def test_sft_early_stop_keeps_the_weights_of_the_lowest_held_out_loss(tokenizer):
    # the held-out episodes want other tokens after the same context: training on the
    # others soon raises their loss; two rises in a row end the SFT, and the weights of
    # the lowest held-out loss are the ones left in the model
    model = _model(tokenizer)
    trained = [Transcript([5, 6, 7, 8, 9], [0, 0, 1, 1, 1]) for _ in range(4)]
    opposite = [Transcript([5, 6, 11, 12, 13], [0, 0, 1, 1, 1])]
    stop = EarlyStop(opposite, every=1, patience=2)
    settings = {"lr": 1e-2, "batch_episodes": 4, "micro_batch_tokens": 64, "pad_token_id": 0}
    losses = sft_train(model, trained, epochs=30, early_stop=stop, **settings)
    steps, values = zip(*stop.curve, strict=True)
    best = min(range(len(values)), key=values.__getitem__)
    assert stop.stopped_early and len(losses) < 30 and steps == tuple(range(len(losses) + 1))
    assert stop.best_step == steps[best] and len(values) - 1 - best == 2
    assert all(value > values[best] for value in values[best + 1 :])
    assert stop.pool(held_out_sums(model, opposite, 64, 0)) == pytest.approx(values[best], rel=1e-5)
    # held-out episodes like the training ones: the loss falls, the last weights stay
    model = _model(tokenizer)
    alike = EarlyStop([Transcript([5, 6, 7, 8, 9], [0, 0, 1, 1, 1])], every=3)
    losses = sft_train(model, trained, epochs=10, early_stop=alike, **settings)
    assert len(losses) == 10 and not alike.stopped_early
    assert [step for step, _ in alike.curve] == [0, 3, 6, 9, 10] and alike.best_step == 10


def test_sft_early_stop_pools_the_tasks_as_asked(tokenizer):
    # one held-out episode the SFT learns ("os", 3 loss tokens) beside twenty it unlearns
    # ("alfworld", 60 tokens): over tokens the unlearnt ones soon rule and early weights
    # are kept; as a mean over the two tasks the learnt one's fall wins for longer
    trained = [Transcript([5, 6, 7, 8, 9], [0, 0, 1, 1, 1]) for _ in range(4)]
    held = [Transcript([5, 6, 7, 8, 9], [0, 0, 1, 1, 1])]
    held += [Transcript([5, 6, 11, 12, 13], [0, 0, 1, 1, 1])] * 20
    task_ids = ["os"] + ["alfworld"] * 20
    settings = {"lr": 1e-2, "batch_episodes": 4, "micro_batch_tokens": 64, "pad_token_id": 0}
    kept = {}
    for average in ("tokens", "tasks"):
        stop = EarlyStop(held, every=1, task_ids=task_ids, average=average)
        sft_train(_model(tokenizer), trained, epochs=10, early_stop=stop, **settings)
        assert [set(row) for row in stop.by_task] == [{"os", "alfworld"}] * 11
        os_loss = [row["os"] for row in stop.by_task]
        alf_loss = [row["alfworld"] for row in stop.by_task]
        assert os_loss[-1] < os_loss[0] / 2 and alf_loss[-1] > alf_loss[0]
        pooled = [
            (o * 3 + a * 60) / 63 if average == "tokens" else (o + a) / 2
            for o, a in zip(os_loss, alf_loss, strict=True)
        ]
        assert [v for _, v in stop.curve] == pytest.approx(pooled, rel=1e-5)
        kept[average] = stop.best_step
    assert 0 < kept["tokens"] < kept["tasks"] < 10
    with pytest.raises(ValueError, match="average must be one of"):
        EarlyStop(held, every=1, average="episodes")
    assert tuple(HELD_OUT_AVERAGES) == HELD_OUT_AVERAGE_CHOICES  # what the config accepts
    with pytest.raises(ValueError, match="task of every transcript"):
        EarlyStop(held, every=1, task_ids=["os"])


def test_sft_with_gradient_checkpointing_trains_as_without(tokenizer):
    from agentgym_eppo.trainer.training.models import set_gradient_checkpointing

    transcripts = [Transcript([5, 6, 7, 8, 9], [0, 0, 1, 1, 1]) for _ in range(4)]
    settings = {"lr": 1e-2, "batch_episodes": 2, "micro_batch_tokens": 64, "pad_token_id": 0}
    plain, recomputed = _model(tokenizer), _model(tokenizer)
    set_gradient_checkpointing(recomputed, True)
    assert recomputed.is_activation_checkpointing
    expected = sft_train(plain, transcripts, epochs=2, **settings)
    assert sft_train(recomputed, transcripts, epochs=2, **settings) == pytest.approx(expected)
    for name, value in plain.state_dict().items():
        torch.testing.assert_close(recomputed.state_dict()[name], value)
    set_gradient_checkpointing(recomputed, False)
    assert not recomputed.is_activation_checkpointing


def test_held_out_instances_are_never_trained_on():
    episodes = [
        ExpertEpisode(task, f"{task}-{i % 4}", "", [], "") for task in "ab" for i in range(9)
    ]
    train, held = split_held_out(episodes, 2)
    assert sorted((e.task_id, e.sample_id) for e in held) == [
        ("a", "a-0"), ("a", "a-3"), ("b", "b-0"), ("b", "b-3")
    ]  # fmt: skip
    assert not {(e.task_id, e.sample_id) for e in train} & {(e.task_id, e.sample_id) for e in held}
    assert len(train) == 9 * 2 - 5 * 2  # a-0 played 3 times, a-3 twice
    assert split_held_out(episodes, 0) == (episodes, [])


def test_sft_schedule_warms_up_linearly_then_decays_along_a_cosine():
    factors = [sft_lr_factor(step, 100, 0.05, 0.1) for step in range(100)]
    assert factors[:5] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert factors[5] == pytest.approx(1.0)
    assert factors[52] == pytest.approx(0.1 + 0.9 * 0.5)  # half way through the decay
    assert factors[-1] == pytest.approx(0.1)
    assert all(a >= b for a, b in itertools.pairwise(factors[5:]))
    assert {sft_lr_factor(step, 10, 0.0, 1.0) for step in range(10)} == {1.0}


def test_the_rl_warm_up_rises_linearly_over_its_steps_then_holds():
    assert [warmup_factor(k, 3) for k in range(5)] == pytest.approx([1 / 3, 2 / 3, 1, 1, 1])
    assert [warmup_factor(k, 0) for k in range(3)] == [1.0, 1.0, 1.0]  # off: lr as given


def _recorded_rates(monkeypatch) -> list[float]:
    """The learning rate of every ``AdamW`` step from here on (first parameter group)."""
    rates: list[float] = []
    original_step = torch.optim.AdamW.step

    def record(self, *args, **kwargs):
        rates.append(self.param_groups[0]["lr"])
        return original_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", record)
    return rates


def test_sft_steps_follow_the_schedule(tokenizer, monkeypatch):
    model = _model(tokenizer)
    transcripts = [Transcript([5, 6, 7, 8], [0, 0, 1, 1]) for _ in range(4)]
    rates = _recorded_rates(monkeypatch)
    sft_train(
        model,
        transcripts,
        epochs=5,
        lr=1e-2,
        batch_episodes=4,
        micro_batch_tokens=64,
        pad_token_id=0,
        warmup_fraction=0.2,
        final_lr_fraction=0.1,
    )
    # 5 steps: 1 of warm-up, then the cosine over the remaining 4 (hand-computed)
    assert rates == pytest.approx([1e-2, 1e-2, 7.75e-3, 3.25e-3, 1e-3])


@pytest.mark.parametrize("resume_after", [3, 4, 5])
def test_an_sft_resumed_from_its_saved_state_ends_as_one_never_stopped(
    tmp_path, tokenizer, resume_after
):
    # six transcripts in batches of two: three steps an epoch, so step 3 stops the SFT at
    # an epoch's end, 4 or 5 mid-epoch; the held-out episode wants other tokens, so its
    # best weights come early (step 2) and are the saved state's, not the last
    from agentgym_eppo.trainer.training.checkpoint import load_trainer_state, save_checkpoint
    from agentgym_eppo.trainer.training.models import load_policy

    trained = [Transcript([5, 6, 7 + i, 8, 9 + i], [0, 0, 1, 1, 1]) for i in range(6)]
    held = [Transcript([5, 6, 20, 21, 22], [0, 0, 1, 1, 1])]
    settings = {
        "epochs": 3,
        "lr": 1e-2,
        "batch_episodes": 2,
        "micro_batch_tokens": 64,
        "pad_token_id": 0,
        "warmup_fraction": 0.2,
        "final_lr_fraction": 0.1,
    }
    model = _model(tokenizer)

    def save(state):
        save_checkpoint(tmp_path / f"step_{state['step']}", model, tokenizer, state)

    straight = EarlyStop(held, every=1)
    losses = sft_train(model, trained, early_stop=straight, save_every=1, on_save=save, **settings)
    assert sorted(int(p.name[5:]) for p in tmp_path.glob("step_*")) == list(range(1, 9))
    assert 0 < straight.best_step < resume_after
    rng_after = torch.get_rng_state()
    torch.rand(1)  # the process draws on; the resume puts the saved RNG states back
    saved = tmp_path / f"step_{resume_after}"
    state = load_trainer_state(saved / "trainer_state.pt")
    resumed_model, _ = load_policy(saved)
    resumed = EarlyStop(held, every=1)
    assert sft_train(resumed_model, trained, early_stop=resumed, resume=state, **settings) == losses
    assert (resumed.curve, resumed.best_step) == (straight.curve, straight.best_step)
    assert torch.equal(torch.get_rng_state(), rng_after)
    resumed_weights = resumed_model.state_dict()
    for name, value in model.state_dict().items():
        assert torch.equal(resumed_weights[name], value), name
    # other transcripts than the state's: refused, not trained on
    with pytest.raises(ValueError, match=r"saved for 6 trained and 1 held-out transcripts .* 5 "):
        sft_train(_model(tokenizer), trained[1:], early_stop=resumed, resume=state, **settings)


def _config(tmp_path: Path, *extra: str):
    return load_config(
        None,
        [
            f"output_dir={tmp_path}",
            f"tasks={TASKS}",
            "rollout.group_size=4",
            "rollout.backend=serial",
            "rollout.max_tokens_per_turn=24",
            "rollout.max_context=512",
            "model.vocab_size=400",
            "model.hidden_size=32",
            "model.layers=1",
            "model.heads=2",
            "model.kv_heads=1",
            "sft.episodes_per_task=4",
            "sft.epochs=2",
            "sft.batch_episodes=4",
            "rl.steps=2",
            "rl.lr=1e-3",
            "rl.mini_batches=2",
            "rl.save_every=1",
            "progress=false",
            "tensorboard=false",
            "bf16=false",
            "threads=1",
            *extra,
        ],
    )


@pytest.mark.slow
@pytest.mark.parametrize("sampling", ["", "rl.dynamic_sampling_rounds=3"])
def test_a_run_killed_after_a_step_resumes_to_the_same_next_step(tmp_path, sampling):
    options = [sampling] if sampling else []
    straight = run_training(_config(tmp_path / "straight", *options))
    interrupted = _config(tmp_path / "resumed", *options)
    run_training(interrupted, stop_after_step=1)
    assert not (tmp_path / "resumed" / "eval_after_rl.json").exists()
    resumed = run_training(_config(tmp_path / "resumed", "resume=true", *options))

    def weights(run):
        from safetensors.torch import load_file

        return load_file(str(run / "checkpoints" / "step_2" / "model.safetensors"))

    a, b = weights(straight), weights(resumed)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)

    def records(run):
        lines = (run / "metrics.jsonl").read_text().splitlines()
        out = []
        for line in lines:
            record = json.loads(line)
            record["global"] = {k: v for k, v in record["global"].items() if "seconds" not in k}
            out.append(record)
        return out

    assert [r["step"] for r in records(resumed)] == [1, 2]
    assert records(resumed) == records(straight)
    # rl.warmup_steps 0 (the default): rl.lr from the first step, as given
    assert [r["global"]["lr"] for r in records(straight)] == [1e-3, 1e-3]
    starts = [json.loads(line) for line in (resumed / "machine.jsonl").read_text().splitlines()]
    assert [start["resumed_after_step"] for start in starts] == [None, 1]
    assert {start["kernels"] for start in starts} == {torch.backends.cpu.get_cpu_capability()}
    for stage in ("base", "after_sft", "after_rl"):
        result = json.loads((straight / f"eval_{stage}.json").read_text())
        assert result["split"] == "dev" and set(result["tasks"]) == {"echo", "lookup"}
        assert result["tasks"]["echo"]["n"] == 3
    step = records(straight)[0]
    assert set(step["tasks"]) == {"echo", "lookup"}
    assert {
        "entropy",
        "entropy_ema",
        "collapse_ratio",
        "zscore",
        "clip_eps",
        "ratio_outside_share",
        "clipped_share",
        "success",
        "reward",
        "episode_length",
        "mixed_groups",
        "aborts",
        "tokens",
    } <= set(step["tasks"]["echo"])
    assert 0.0 <= step["tasks"]["echo"]["mixed_groups"] <= 1.0


@pytest.mark.slow
def test_the_rl_warm_up_counts_rl_steps_and_a_resume_picks_it_up(tmp_path, monkeypatch):
    rates = _recorded_rates(monkeypatch)  # no SFT: every AdamW step is an RL one
    options = ("rl.steps=4", "rl.warmup_steps=3", "sft.enabled=false", "eval.stages=[]")
    straight = run_training(_config(tmp_path / "straight", *options))
    straight_rates = list(rates)
    run_training(_config(tmp_path / "resumed", *options), stop_after_step=1)
    rates.clear()
    resumed = run_training(_config(tmp_path / "resumed", "resume=true", *options))

    expected = [1e-3 / 3, 2e-3 / 3, 1e-3, 1e-3]  # RL steps 1-4
    # every optimizer step of an RL step (rl.mini_batches=2, one epoch) runs at its rate
    assert straight_rates == pytest.approx([rate for rate in expected for _ in range(2)])
    assert rates == straight_rates[2:]  # resumed mid-warm-up, at step 2's rate

    def logged(run):
        lines = (run / "metrics.jsonl").read_text().splitlines()
        return [json.loads(line)["global"]["lr"] for line in lines]

    assert logged(straight) == pytest.approx(expected)
    assert logged(resumed) == logged(straight)


@pytest.mark.slow
def test_dynamic_sampling_trains_only_groups_whose_rewards_differ(tmp_path, monkeypatch):
    updates: list[list[Episode]] = []
    original = PolicyUpdater.step

    def recorded(self, episodes, generator):
        updates.append(list(episodes))
        return original(self, episodes, generator)

    monkeypatch.setattr(PolicyUpdater, "step", recorded)
    run = tmp_path / "run"
    run_training(_config(run, "rl.dynamic_sampling_rounds=3", "rl.steps=4", "eval.stages=[]"))
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == len(updates) == 4
    slots, wanted = 8, 2  # two tasks of 4 slots, groups of 4
    for record, trained in zip(records, updates, strict=True):
        g = record["global"]
        groups: dict[str, set[float]] = {}
        for episode in trained:
            groups.setdefault(episode.group, set()).add(episode.reward)
        assert all(len(rewards) > 1 for rewards in groups.values()), groups
        assert all(len([e for e in trained if e.group == k]) == 4 for k in groups)
        assert 1 <= g["rounds"] <= 3 and g["episodes"] == slots * g["rounds"]
        assert g["trained_episodes"] == len(trained)
        assert g["rounds"] == 3 or len(groups) >= wanted  # stops early only when full
    # the filter had something to remove: some played group ended alike
    assert any(r["global"]["trained_episodes"] < r["global"]["episodes"] for r in records)


@pytest.mark.slow
def test_train_samples_the_configured_share_of_turns_from_a_stale_engine(tmp_path):
    run = tmp_path / "run"
    run_training(_config(run, "engine.stale_share=0.5", "engine.stale_every=2", "eval.stages=[]"))
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 2
    for record in records:
        turns = sum(
            task["episode_length"] * 4 for task in record["tasks"].values()
        )  # two tasks of 4 slots, one round
        assert 0 < record["global"]["stale_turns"] < turns


def test_config_reads_yaml_and_applies_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("seed: 3\nclip:\n  policy: dcpo\nrl:\n  steps: 5\n  lr: 1e-5\n")
    config = load_config(path, ["rl.steps=7", "clip.eppo.taskwise=false"])
    assert (config.seed, config.clip.policy, config.rl.steps, config.rl.lr) == (3, "dcpo", 7, 1e-5)
    assert config.clip.eppo.taskwise is False


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "clip.policy=ppo",
            r"^clip.policy: unknown clip policy 'ppo' \(did you mean 'eppo'\?\); "
            r"known: bapo, dapo, dcpo, eppo, fixed$",
        ),
        (
            "algorithm.advantage=gae",
            r"^algorithm.advantage: unknown advantage estimator 'gae'; known: grpo, rloo$",
        ),
        ("clip.eppo.alpha=1.5", r"^clip.eppo: alpha must be in \[0, 1\), got 1.5$"),
        ("clip.eppo.eps_min=0.4", r"^clip.eppo: need 0 < eps_min <= eps_max, got 0.4 and 0.3$"),
        ("clip.policy=fixed;clip.eps=1.5", r"^clip.policy=fixed: need 0 < eps_low < 1"),
        ("clip.policy=fixed;clip.eps=0", r"^clip.policy=fixed: need 0 < eps_low < 1"),
        ("clip.policy=dcpo;clip.dcpo_r_max=0.5", r"^clip.policy=dcpo: .*need r_max > 1, got 0.5$"),
        (
            "clip.policy=bapo;clip.bapo_rho0=1.5",
            r"^clip.policy=bapo: .*need 0 < rho0 < 1, got 1.5$",
        ),
        ("algorithm.dual_clip_c=1.0", r"^algorithm.dual_clip_c must be > 1"),
        ("rl.lr=0", r"^rl.lr and rl.max_grad_norm must be > 0"),
        ("rl.stepz=3", r"unknown config key rl.stepz \(did you mean rl.steps\?\); known: "),
        (
            "tasks={db: 6}",
            r"tasks.db = 6 slots must be a positive multiple of rollout.group_size \(8\)",
        ),
        ("rl.steps=many", r"rl.steps: expected int, got 'many'"),
        ("rl.warmup_steps=1.5", r"^rl.warmup_steps: expected int, got 1.5$"),
        ("rl.dynamic_sampling_rounds=0", r"^rl.dynamic_sampling_rounds must be >= 1 \(1 = off\)$"),
        ("sft.save_every=-1", r"^sft.save_every must be >= 0 \(0 = off\)$"),
        ("eval.tasks=[]", r"^eval.tasks must name at least one task"),
        ("eval.slots_per_task=0", r"^eval.slots_per_task must be >= 1$"),
        ("seed", r"an override is key=value"),
    ],
)
def test_bad_config_values_are_clear_errors(override, message):
    with pytest.raises((ValueError, TypeError), match=message):
        load_config(None, override.split(";"))


def test_cli_evaluates_a_saved_checkpoint(tmp_path, tokenizer, capsys):
    model = _model(tokenizer)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    output = tmp_path / "eval.json"
    code = cli_main(
        [
            "eval",
            "--checkpoint",
            str(tmp_path),
            "--tasks",
            "support.trainer_test_envs:Echo-v0",
            "--max-tokens",
            "8",
            "--output",
            str(output),
        ]
    )
    assert code == 0
    result = json.loads(output.read_text())
    assert result["tasks"]["echo"]["n"] == 3
    assert sum(result["tasks"]["echo"]["statuses"].values()) == 3
    assert json.loads(capsys.readouterr().out) == result


def test_cli_eval_plays_each_instance_once_per_sample(tmp_path, tokenizer):
    model = _model(tokenizer)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    output = tmp_path / "eval.json"
    arguments = [
        "eval",
        "--checkpoint",
        str(tmp_path),
        "--tasks",
        "support.trainer_test_envs:Echo-v0",
    ]
    options = ["--max-tokens", "8", "--temperature", "0.8", "--samples", "2", "--prompt"]
    assert cli_main([*arguments, *options, "compact", "--output", str(output)]) == 0
    result = json.loads(output.read_text())
    assert result["tasks"]["echo"]["n"] == 6  # 3 instances x 2 attempts
    assert sum(result["tasks"]["echo"]["statuses"].values()) == 6


def test_an_sft_only_run_without_evaluations_leaves_its_checkpoint(tmp_path):
    run_dir = Path(
        run_training(
            _config(
                tmp_path,
                "rl.steps=0",
                "eval.stages=[]",
                "sft.episodes_by_task={echo: 2, lookup: 4}",
                "sft.held_out_per_task=1",
                "sft.held_out_every=1",
                "sft.gradient_checkpointing=true",
                "rollout.prompt=compact",
            )
        )
    )
    record = json.loads((run_dir / "sft.json").read_text())
    assert record["held_out"] == {"echo": 1, "lookup": 1}
    assert sum(record["episodes"].values()) <= 6 and record["held_out_curve"][0][0] == 0
    assert record["best_step"] in [step for step, _ in record["held_out_curve"]]
    assert record["held_out_average"] == "tokens"
    assert set(record["held_out_tokens"]) == {"echo", "lookup"}
    assert all(n > 0 for n in record["held_out_tokens"].values())
    tokens = record["held_out_tokens"]  # the pooled loss is the tasks' token-weighted mean
    curves = zip(record["held_out_curve"], record["held_out_by_task"], strict=True)
    for (_, pooled), by_task in curves:
        weighted = sum(by_task[task] * n for task, n in tokens.items()) / sum(tokens.values())
        assert pooled == pytest.approx(weighted, rel=1e-5)
    assert (run_dir / "checkpoints" / "sft" / "config.json").is_file()
    card = json.loads((run_dir / "checkpoints" / "sft" / "agentgym_policy.json").read_text())
    assert card == {"prompt_style": "compact", "call_format": "hermes"}
    assert not list(run_dir.glob("eval_*.json"))


@pytest.mark.parametrize("bf16", ["false", "true"])  # true: autocast, as on avx512_bf16 CPUs
def test_a_run_killed_mid_sft_resumes_the_sft_to_the_weights_of_one_never_stopped(
    tmp_path, monkeypatch, bf16
):
    from rich.console import Console

    import agentgym_eppo.trainer.run as run_module

    options = [
        f"bf16={bf16}",
        "rl.steps=0",
        "eval.stages=[]",
        "sft.epochs=3",
        "sft.batch_episodes=2",
        "sft.held_out_per_task=1",
        "sft.held_out_every=1",
        "sft.save_every=2",
    ]
    straight = Path(run_training(_config(tmp_path / "straight", *options)))

    class Killed(Exception):
        pass

    saving = run_module.save_checkpoint

    def save_then_die(directory, *args, **kwargs):
        saving(directory, *args, **kwargs)
        raise Killed  # the process dies right after the first SFT state is written

    monkeypatch.setattr(run_module, "save_checkpoint", save_then_die)
    with pytest.raises(Killed):
        run_training(_config(tmp_path / "resumed", *options))
    monkeypatch.undo()
    states = tmp_path / "resumed" / "sft_state"
    assert (states / "latest").read_text() == "step_2\n"
    # ... or in the middle of writing the next one: its staging folder is left half done
    (states / "step_4.tmp").mkdir()
    (states / "step_4.tmp" / "model.safetensors").write_bytes(b"cut off")
    console = Console(record=True, width=200)
    resumed = Path(run_training(_config(tmp_path / "resumed", "resume=true", *options), console))
    assert "resuming the SFT after step 2 from" in console.export_text()
    a, b = (json.loads((run / "sft.json").read_text()) for run in (straight, resumed))
    assert len(a["losses"]) > 4 and a["losses"] == b["losses"]
    assert (a["held_out_curve"], a["best_step"]) == (b["held_out_curve"], b["best_step"])
    weights = [
        (run / "checkpoints" / "sft" / "model.safetensors").read_bytes()
        for run in (straight, resumed)
    ]
    assert weights[0] == weights[1]
    # the half-written folder is gone, and only the newest state is kept
    last = (len(b["losses"]) - 1) // 2 * 2
    assert sorted(path.name for path in states.iterdir()) == ["latest", f"step_{last}"]


def test_a_run_stopped_after_its_sft_resumes_from_the_finished_sft_not_its_states(
    tmp_path, monkeypatch
):
    from rich.console import Console

    import agentgym_eppo.trainer.run as run_module

    options = [
        "rl.steps=0",
        "eval.stages=[after_sft]",
        "eval.max_instances_per_task=1",
        "eval.samples_per_instance=1",
        "sft.epochs=2",
        "sft.batch_episodes=2",
        "sft.save_every=2",
    ]

    class Killed(Exception):
        pass

    evaluate = run_module.Trainer.evaluate

    def die(self, stage):
        if stage == "after_sft":
            raise Killed  # the process dies in the after-SFT evaluation
        return evaluate(self, stage)

    monkeypatch.setattr(run_module.Trainer, "evaluate", die)
    with pytest.raises(Killed):
        run_training(_config(tmp_path, *options))
    monkeypatch.undo()
    assert (tmp_path / "sft_state" / "latest").is_file()
    sft_record = (tmp_path / "sft.json").read_text()
    weights = (tmp_path / "checkpoints" / "sft" / "model.safetensors").read_bytes()
    console = Console(record=True, width=200)
    run_training(_config(tmp_path, "resume=true", *options), console)
    log = console.export_text()
    assert "resuming after the finished SFT from" in log and "SFT on" not in log
    assert (tmp_path / "sft.json").read_text() == sft_record  # the SFT was not run again
    assert (tmp_path / "checkpoints" / "sft" / "model.safetensors").read_bytes() == weights
    assert json.loads((tmp_path / "eval_after_sft.json").read_text())["stage"] == "after_sft"
    # resumed once more, with its evaluation written, nothing is left to do before RL
    console = Console(record=True, width=200)
    run_training(_config(tmp_path, "resume=true", *options), console)
    assert "eval after_sft" not in console.export_text()


def test_eval_plays_fewer_instances_of_the_tasks_named_in_instances_by_task(tokenizer):
    from agentgym_eppo.trainer.rollout.episodes import RolloutLimits
    from agentgym_eppo.trainer.rollout.evaluation import evaluate_policy
    from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine

    engine = HFGenerateEngine(_model(tokenizer), tokenizer.eos_token_id, tokenizer.pad_token_id)
    settings = {
        "stage": "check",
        "max_instances": 3,
        "limits": RolloutLimits(8, 256, 0.8),
        "backend": "serial",
        "samples_per_instance": 2,
    }
    tasks = ["support.trainer_test_envs:Echo-v0", "support.trainer_test_envs:Lookup-v0"]
    result = evaluate_policy(engine, tokenizer, tasks, instances_by_task={"lookup": 1}, **settings)
    assert result["tasks"]["echo"]["n"] == 6  # max_instances 3 x 2 samples
    assert result["tasks"]["lookup"]["n"] == 2  # its own 1 x 2 samples
    with pytest.raises(ValueError, match="webshop"):
        evaluate_policy(engine, tokenizer, tasks, instances_by_task={"webshop": 1}, **settings)


def test_a_skipped_task_takes_its_per_task_settings_with_it(tmp_path):
    from rich.console import Console

    from agentgym_eppo.trainer.run import _available_tasks_only

    gone = "support.trainer_test_envs:Gone-v0"
    config = _config(
        tmp_path,
        f"tasks={{support.trainer_test_envs:Echo-v0: 4, {gone}: 4}}",
        f"sft.episodes_by_task={{{gone}: 2}}",
        f"eval.instances_by_task={{{gone}: 1, support.trainer_test_envs:Echo-v0: 2}}",
    )
    trimmed = _available_tasks_only(config, Console(file=None, quiet=True))
    assert list(trimmed.tasks) == ["support.trainer_test_envs:Echo-v0"]
    assert trimmed.sft.episodes_by_task == {}
    assert trimmed.eval.instances_by_task == {"support.trainer_test_envs:Echo-v0": 2}


@pytest.mark.slow
def test_rl_on_one_task_is_scored_on_every_task_named_in_eval_tasks(tmp_path):
    echo, lookup = "support.trainer_test_envs:Echo-v0", "support.trainer_test_envs:Lookup-v0"
    run = tmp_path / "run"
    run_training(
        _config(
            run,
            f"tasks={{{echo}: 4}}",
            f"eval.tasks=[{echo}, {lookup}]",
            "eval.stages=[after_rl]",
            "rl.steps=1",
        )
    )
    record = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    assert set(record["tasks"]) == {"echo"}  # RL played Echo only
    result = json.loads((run / "eval_after_rl.json").read_text())
    assert set(result["tasks"]) == {"echo", "lookup"}


def test_the_evaluation_does_not_depend_on_the_training_slots(tmp_path, tokenizer, monkeypatch):
    # the protocol scores every method alike: which sample an attempt draws follows the
    # eval's slot layout, so the layout is the protocol's, not the training `tasks`' slots
    import agentgym_eppo.trainer.run as run_module

    policy = tmp_path / "policy"
    _model(tokenizer).save_pretrained(policy)
    tokenizer.save_pretrained(policy)
    layouts = []
    original = run_module.evaluate_policy

    def recorded(*args, **kwargs):
        layouts.append(kwargs["slots_per_task"])
        return original(*args, **kwargs)

    monkeypatch.setattr(run_module, "evaluate_policy", recorded)
    echo, lookup = "support.trainer_test_envs:Echo-v0", "support.trainer_test_envs:Lookup-v0"
    for slots in (4, 8):
        run_training(
            _config(
                tmp_path / f"slots{slots}",
                f"tasks={{{echo}: {slots}, {lookup}: 4}}",
                f"model.path={policy}",
                "sft.enabled=false",
                "rl.steps=0",
                "eval.stages=[base]",
                "eval.slots_per_task=3",
            )
        )
    assert layouts == [3, 3]


def test_two_training_seeds_evaluate_the_same_instance_ids(tmp_path, tokenizer):
    # a comparison pairs its runs episode by episode: the instances an evaluation draws
    # (fewer than the split) follow eval.instance_seed, never the run's seed
    policy = tmp_path / "policy"
    _model(tokenizer).save_pretrained(policy)
    tokenizer.save_pretrained(policy)
    echo, lookup = "support.trainer_test_envs:Echo-v0", "support.trainer_test_envs:Lookup-v0"

    def played(run: str, *overrides: str) -> list[tuple[str, str]]:
        run_training(
            _config(
                tmp_path / run,
                f"tasks={{{echo}: 4, {lookup}: 4}}",
                f"model.path={policy}",
                "sft.enabled=false",
                "rl.steps=0",
                "eval.stages=[base]",
                "eval.split=train",  # 8 instances, 3 drawn
                "eval.max_instances_per_task=3",
                *overrides,
            )
        )
        result = json.loads((tmp_path / run / "eval_base.json").read_text())
        return [(e["task_id"], e["sample_id"]) for e in result["episodes"]]

    first, second = played("seed0", "seed=0"), played("seed1", "seed=1")
    assert first == second and len(first) == 6
    assert played("other", "seed=0", "eval.instance_seed=7") != first  # the draw is seeded


def test_the_run_summary_prints_dev_success_and_reward_per_stage(tmp_path):
    from rich.console import Console

    from agentgym_eppo.trainer.analysis.summary import print_summary

    for stage, reward in (("after_sft", -0.1), ("after_rl", 0.25)):
        result = {
            "tasks": {"os": {"success": 0.5, "reward": reward}},
            "mean_success": 0.5,
            "split": "dev",
        }
        (tmp_path / f"eval_{stage}.json").write_text(json.dumps(result))
    console = Console(record=True, width=100)
    print_summary(console, tmp_path, seed=7)
    text = console.export_text()
    assert "dev success per task (seed 7)" in text and "dev reward per task (seed 7)" in text
    assert "-0.100" in text and "0.250" in text and "base" not in text


def test_the_run_summary_names_the_split_it_was_played_on(tmp_path):
    from rich.console import Console

    result = {"tasks": {"os": {"success": 0.5, "reward": 0.5}}, "mean_success": 0.5}
    (tmp_path / "eval_after_rl.json").write_text(json.dumps({**result, "split": "test"}))
    console = Console(record=True, width=100)
    from agentgym_eppo.trainer.analysis.summary import print_summary

    print_summary(console, tmp_path, seed=0)
    text = console.export_text()
    assert "test success per task" in text and "dev" not in text


@pytest.mark.parametrize("name", ["demo-cpu.yaml", "scratch-cpu.yaml", "real-model-cpu.yaml"])
def test_the_shipped_cpu_configs_are_consistent(name: str) -> None:
    """Per-task settings name the config's tasks, and every position fits the model."""
    from transformers import AutoConfig

    from agentgym_eppo.trainer.training.models import resolve_model_path

    config = load_config(Path(__file__).parents[1] / "configs" / name, [])
    assert set(config.sft.episodes_by_task) <= set(config.tasks)
    assert set(config.eval.instances_by_task) <= set(config.eval.tasks or config.tasks)
    r = config.rollout
    positions = config.model.max_position_embeddings
    if config.model.path is not None:  # the demo: the shipped base model's own context
        positions = AutoConfig.from_pretrained(
            resolve_model_path(config.model.path)
        ).max_position_embeddings
    assert positions >= r.max_context + r.max_tokens_per_turn


class _Moment:
    """A log file that notes, at each line written, how many RL steps the run has
    recorded so far (its metrics file): when a line came out, not just that it did."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir, self.lines = run_dir, []

    def write(self, text: str) -> int:
        metrics = self.run_dir / "metrics.jsonl"
        done = len(metrics.read_text().splitlines()) if metrics.exists() else 0
        self.lines += [(line, done) for line in text.splitlines() if line.strip()]
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("terminal", [False, True], ids=["log-file", "terminal"])
def test_outside_a_terminal_each_stage_and_rl_step_is_a_line_as_it_happens(tmp_path, terminal):
    from rich.console import Console

    config = _config(
        tmp_path,
        "progress=true",
        "sft.enabled=false",
        "eval.stages=[after_rl]",
        "eval.max_instances_per_task=2",
    )
    log = _Moment(tmp_path)
    run_training(config, Console(file=log, force_terminal=terminal, width=200))  # type: ignore[arg-type]
    steps = [(line, done) for line, done in log.lines if line.startswith("RL step ")]
    if terminal:  # the bar redraws in place: no line per step, the bar shows the step
        assert steps == []
        assert any("RL step 2 success" in line for line, _ in log.lines)
        return
    stages = [line.split(" (")[0] for line, _ in log.lines if line.startswith("eval after_rl")]
    assert stages == ["eval after_rl", "eval after_rl"]  # when it starts, and its result
    assert [line.split(":")[0] for line, _ in steps] == ["RL step 1/2", "RL step 2/2"]
    # each written right after its step's record, before the next step ran
    assert [done for _, done in steps] == [1, 2]
    assert all(" success " in line and " reward " in line for line, _ in steps)
    assert any(line.startswith("RL steps 1-2 on ") for line, _ in log.lines)


def test_a_run_with_sft_and_rl_pairs_rl_against_the_sft_policy(tmp_path):
    from rich.console import Console

    from agentgym_eppo.trainer.analysis.summary import print_summary

    def result(successes):
        episodes = [
            {"task_id": "os", "sample_id": f"i{k}", "success": won, "reward": float(won)}
            for k, won in enumerate(successes)
        ]
        rate = sum(successes) / len(successes)
        return {
            "tasks": {"os": {"success": rate, "reward": rate}},
            "split": "dev",
            "episodes": episodes,
        }

    stages = {"base": [0, 0, 0, 0], "after_sft": [1, 1, 0, 0], "after_rl": [1, 1, 1, 0]}
    for stage, successes in stages.items():
        (tmp_path / f"eval_{stage}.json").write_text(json.dumps(result(successes)))
    print_summary(Console(record=True, width=100), tmp_path, seed=0)
    text = (tmp_path / "paired_eval.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("# ")]
    assert [h.split(",")[0] for h in headings] == [
        "# after_rl against base",
        "# after_sft against base",
        "# after_rl against after_sft",
    ]
    last = text[text.index("# after_rl against after_sft") :]
    assert "| os | 4 | 0.500 | 0.750 |" in last


def test_a_run_from_a_checkpoint_says_it_skips_the_stages_before_rl(tmp_path, tokenizer):
    from rich.console import Console

    checkpoint = tmp_path / "checkpoint"
    _model(tokenizer).save_pretrained(checkpoint)
    tokenizer.save_pretrained(checkpoint)
    config = _config(
        tmp_path / "run",
        f"init_checkpoint={checkpoint}",
        "sft.enabled=false",
        "rl.steps=0",
        "eval.stages=[after_sft, after_rl]",
        "eval.max_instances_per_task=2",
    )
    console = Console(record=True, width=200)
    run = Path(run_training(config, console))
    assert "eval after_sft skipped: this run starts after them" in console.export_text()
    # rl.steps=0 with after_rl is how the checkpoint itself is evaluated
    assert (run / "eval_after_rl.json").exists() and not (run / "eval_after_sft.json").exists()
