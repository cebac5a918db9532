"""The agent RL step benchmark (ours vs TRL's ``GRPOTrainer(environment_factory=...)``) at
its smallest size, on one family: both sides run, and the results files hold what the
report promises. No timing is checked, only the structure and the limits both sides
were given."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("trl")
pytest.importorskip("torch")

from benchmarks.bench_agent_step import NAME, SIZES, main
from benchmarks.run import available

SIDE_FIELDS = {
    "seconds",
    "rollout_seconds",
    "episodes",
    "episodes_per_s",
    "sampled_tokens",
    "model_turns",
    "env_steps",
    "tool_calls",
    "success",
    "peak_rss_mb",
}
UPDATE_FIELDS = {"update_seconds", "update_gflop"}
"""Ours only: the update's time and FLOPs, for its share of the fp32 peak."""


def test_the_benchmark_is_registered() -> None:
    assert NAME in available()


@pytest.mark.slow
@pytest.mark.train
def test_quick_run_writes_both_sides_of_one_family(tmp_path) -> None:  # type: ignore[no-untyped-def]
    size = SIZES["quick"]
    turns, per_turn = 2, 48  # the quick size's rollout.max_turns and max_tokens_per_turn
    assert set(size.overrides) == {
        f"rollout.max_turns={turns}",
        f"rollout.max_tokens_per_turn={per_turn}",
    }
    returned = main("quick", ["db"], tmp_path)

    written = json.loads((tmp_path / f"{NAME}.json").read_text(encoding="utf-8"))
    assert written == json.loads(json.dumps(returned))
    assert written["size_name"] == "quick"
    assert list(written["tasks"]) == ["db"]
    assert len(written["load_before"]) == len(written["load_after"]) == 3
    assert written["machine"]["cpu"] and written["machine"]["cores"] >= 1
    entry = written["tasks"]["db"]
    assert written["fp32_peak_gflops"] > 0
    for side, own in (("ours", UPDATE_FIELDS), ("trl", set())):
        facts = entry[side]
        assert set(facts) == SIDE_FIELDS | own, side
        assert facts["episodes"] == size.episodes
        assert 0 < facts["rollout_seconds"] < facts["seconds"]
        assert 0 < facts["sampled_tokens"] <= turns * per_turn
        assert 1 <= facts["model_turns"] <= turns
        assert 0 <= facts["env_steps"] <= facts["model_turns"]
        assert 0 <= facts["tool_calls"] <= turns
        assert 0 <= facts["success"] <= 1
    update = entry["ours"]
    assert 0 < update["update_seconds"] < update["seconds"] - update["rollout_seconds"]
    assert update["update_gflop"] > 0
    ours, trl = entry["ours"]["episodes_per_s"], entry["trl"]["episodes_per_s"]
    assert entry["ratio"] == pytest.approx(ours / trl)
    # the compact prompt comes out as the same token ids on both sides
    assert entry["prompt"]["same"] and entry["prompt"]["ours"] == entry["prompt"]["trl"]
    settings = {name: (mine, peer) for name, mine, peer in written["settings"]}
    assert settings["tokens per turn"][0] == str(per_turn)
    assert f"`max_tool_calling_iterations` {turns - 1}" in settings["turns"][1]

    report = (tmp_path / f"{NAME}.md").read_text(encoding="utf-8")
    assert written["machine"]["cpu"] in report
    assert "Load average (1/5/15 min)" in report
    assert report.count("| db | ") == 2  # the step table and the update's share of the peak
    assert "share of the fp32 peak" in report
    assert "| tokens per turn | 48 |" in report
