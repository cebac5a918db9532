"""Every shipped KG question is answered correctly by replaying its gold actions."""

from __future__ import annotations

import pytest

from agentgym_eppo.environments.kg import KGEnv


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_every_shipped_question_is_solved_by_its_gold_actions(split: str) -> None:
    env = KGEnv(split=split)
    failures = []
    for index in range(env.num_tasks):
        env.reset(options={"index": index})
        for action in env.record.actions:
            observation, reward, terminated, truncated, _ = env.step(env.expert_action())
            assert not (terminated or truncated), (env.record.sample_id, action, observation)
            assert not observation.startswith("Error"), (env.record.sample_id, action, observation)
        observation, reward, terminated, _, info = env.step(env.expert_action())
        if not (terminated and reward == 1.0 and info["score"] == 1.0):
            failures.append((env.record.sample_id, observation, sorted(env.record.answers)))
    assert failures == []
