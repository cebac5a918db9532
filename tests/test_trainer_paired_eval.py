"""Before/after evaluations compared instance by instance."""

from __future__ import annotations

import pytest

from agentgym_eppo.trainer.analysis.paired_eval import compare_evals, comparison_table
from agentgym_eppo.trainer.rollout.chat import Transcript
from agentgym_eppo.trainer.rollout.episodes import Episode
from agentgym_eppo.trainer.rollout.evaluation import summarize


def _eval(outcomes: dict[str, list[tuple[str, bool]]]) -> dict:
    episodes = []
    for task, played in outcomes.items():
        for sample_id, success in played:
            episode = Episode(0, task, sample_id, sample_id, Transcript([0]))
            episode.success, episode.reward, episode.status = success, float(success), "completed"
            episode.turns = 2
            episodes.append(episode)
    return summarize(episodes, "x", "dev")


def test_summaries_list_every_episode_for_pairing() -> None:
    result = _eval({"db": [("d1", True), ("d1", False)], "os": [("o1", True)]})
    assert result["episodes"] == [
        {"task_id": "db", "sample_id": "d1", "success": success, "reward": float(success),
         "status": "completed", "turns": 2}
        for success in (True, False)
    ] + [{"task_id": "os", "sample_id": "o1", "success": True, "reward": 1.0,
          "status": "completed", "turns": 2}]  # fmt: skip


def test_changes_are_paired_by_instance_and_averaged_over_attempts() -> None:
    before = _eval({"os": [(f"o{k}", False) for k in range(12)] + [("only-before", True)],
                    "kg": [("k1", True), ("k1", True)]})  # fmt: skip
    after = _eval(
        {"os": [(f"o{k}", k < 10) for k in range(12)], "kg": [("k1", True), ("k1", False)]}
    )
    comparison = compare_evals(before, after, rounds=2000)
    os_change, kg_change = comparison.tasks["os"], comparison.tasks["kg"]
    assert (os_change.instances, os_change.before, os_change.after) == (12, 0.0, 10 / 12)
    assert os_change.test.statistic == 10 and os_change.test.p_value == pytest.approx(2**-10)
    assert (kg_change.before, kg_change.after) == (1.0, 0.5)
    assert kg_change.test.p_value == 1.0  # one instance got worse: no evidence of a gain
    assert comparison.mean_before == pytest.approx(0.5)
    assert comparison.mean_after == pytest.approx((10 / 12 + 0.5) / 2)
    table = comparison_table(comparison, "base", "after_rl")
    assert "| os | 12 | 0.000 | 0.833 |" in table and "permutation p" in table


def test_an_evaluation_without_episodes_cannot_be_paired() -> None:
    with pytest.raises(ValueError, match="cannot be compared pair by pair"):
        compare_evals({"tasks": {}}, _eval({"os": [("o", True)]}))
