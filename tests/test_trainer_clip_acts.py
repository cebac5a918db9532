"""A clip that acts: with the default update settings later mini-batches are off-policy,
so the clip range changes the update (with one mini-batch and one epoch it cannot)."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agentgym_eppo.trainer.algorithms import defaults  # noqa: E402
from agentgym_eppo.trainer.algorithms.clip_policies import FixedClip  # noqa: E402
from agentgym_eppo.trainer.config import TrainConfig  # noqa: E402
from agentgym_eppo.trainer.rl_step import update_settings  # noqa: E402
from agentgym_eppo.trainer.rollout.chat import Transcript  # noqa: E402
from agentgym_eppo.trainer.rollout.episodes import Episode  # noqa: E402
from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer  # noqa: E402
from agentgym_eppo.trainer.training.update import (  # noqa: E402
    PolicyUpdater,
    UpdateResult,
    UpdateSettings,
)

pytestmark = pytest.mark.train
LR = 3e-2  # large enough that one AdamW step moves some ratios past 1.1 on a tiny model


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(["Say apple. Call say with the word."] * 20, vocab_size=400)


def _episodes() -> list[Episode]:
    return [
        Episode(
            0,
            task,
            f"{task}:{k // 4}",
            "s",
            Transcript([5, 6, 7 + k, 8, 9 + k, 10, 11 + k], [0, 0, 1, 1, 1, 1, 1]),
            reward=float(k % 2),
        )
        for task in ("echo", "lookup")
        for k in range(8)
    ]


def _update(tokenizer, eps: float, settings: UpdateSettings) -> tuple[dict, UpdateResult]:
    torch.set_num_threads(1)
    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1, seed=0)
    updater = PolicyUpdater(
        model,
        torch.optim.AdamW(model.parameters(), lr=LR),
        FixedClip(eps, eps),
        settings,
        pad_token_id=0,
    )
    result = updater.step(_episodes(), torch.Generator().manual_seed(0))
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, result


def _differ(a: dict, b: dict) -> bool:
    return any(not torch.equal(a[name], b[name]) for name in a)


def test_the_defaults_split_each_step_into_several_off_policy_mini_batches():
    settings = UpdateSettings()
    assert settings.mini_batches * settings.ppo_epochs > 1
    config = TrainConfig()
    assert (config.rl.mini_batches, config.rl.ppo_epochs) == (
        defaults.MINI_BATCHES,
        defaults.PPO_EPOCHS,
    )
    assert update_settings(config, bf16=False) == dataclasses.replace(
        settings, temperature=config.rollout.temperature
    )


def test_with_the_defaults_a_narrow_and_a_wide_clip_give_different_updates(tokenizer):
    narrow, narrow_result = _update(tokenizer, 0.1, UpdateSettings(kl_coef=0.0))
    wide, wide_result = _update(tokenizer, 0.3, UpdateSettings(kl_coef=0.0))
    assert _differ(narrow, wide)
    # The narrow range sees more ratios outside it, and removes more gradients.
    assert sum(narrow_result.task_ratio_outside_share.values()) > 0
    assert sum(narrow_result.task_clipped_share.values()) > sum(
        wide_result.task_clipped_share.values()
    )
    for task, share in narrow_result.task_clipped_share.items():
        assert share <= narrow_result.task_ratio_outside_share[task]


def test_with_one_mini_batch_and_one_epoch_the_clip_range_changes_nothing(tokenizer):
    on_policy = UpdateSettings(kl_coef=0.0, mini_batches=1, ppo_epochs=1)
    narrow, narrow_result = _update(tokenizer, 0.1, on_policy)
    wide, _ = _update(tokenizer, 0.3, on_policy)
    assert not _differ(narrow, wide)
    assert narrow_result.task_ratio_outside_share == {"echo": 0.0, "lookup": 0.0}
