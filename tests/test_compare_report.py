"""The comparison report over hand-written runs whose success and diagnostics are known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.handmade_runs import write_episodes, write_run

from agentgym_eppo.trainer.analysis.compare_claims import PAPER_CLAIMS, claim_verdict
from agentgym_eppo.trainer.analysis.compare_collect import (
    Confirmation,
    SeedResult,
    collect_confirmation,
    collect_seed,
)
from agentgym_eppo.trainer.analysis.compare_markdown import interval_cell
from agentgym_eppo.trainer.analysis.compare_report import write_compare_report
from agentgym_eppo.trainer.analysis.compare_stats import paired_over_seeds

# Two bands that never cross: no crossover, falling entropy, no late rise.
BANDED = {
    "os": [2.0 - 0.1 * t for t in range(10)],
    "db": [1.0 - 0.05 * t for t in range(10)],
}


def finished_runs(root: Path) -> dict[str, list[SeedResult]]:
    """grpo_tan: the crossing default curves, os 0.5 / db 0.25 on every seed.
    eppo: banded curves, os 1.0 / 0.75 / 0.5 and db 0.5 over seeds 0-2. rloo: nothing yet."""
    grpo = [collect_seed(s, write_run(root / f"grpo_tan/seed{s}")) for s in range(3)]
    eppo = [
        collect_seed(
            s,
            write_run(root / f"eppo/seed{s}", entropy=BANDED, after_rl={"os": os, "db": 0.5}),
        )
        for s, os in enumerate((1.0, 0.75, 0.5))
    ]
    return {"grpo_tan": grpo, "eppo": eppo, "rloo": []}


@pytest.fixture(scope="module")
def partial_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of :func:`finished_runs` with the SFT start: 6 of 9 runs, rloo missing."""
    root = tmp_path_factory.mktemp("compare")
    return write_compare_report(
        root / "out",
        finished_runs(root / "runs"),
        planned_seeds={key: [0, 1, 2] for key in ("grpo_tan", "eppo", "rloo")},
        start_success={"os": 0.25, "db": 0.125},
    )


def test_collect_seed_reads_final_success_and_diagnostics(tmp_path: Path) -> None:
    result = collect_seed(4, write_run(tmp_path / "run"))
    assert result.seed == 4
    assert result.success == {"os": 0.5, "db": 0.25, "mean_success": 0.375}
    assert result.diagnostics["crossover_count"] == 3.0
    assert result.diagnostics["late_spike_max"] == 0.5
    assert result.diagnostics["clipped_share"] == pytest.approx(0.05)
    assert result.diagnostics["ratio_outside_share"] == pytest.approx(0.08)


def test_collect_seed_refuses_an_unfinished_run(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    (run / "eval_after_rl.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"no eval_after_rl\.json; the run did not finish"):
        collect_seed(0, run)


def test_interval_cell_is_the_mean_with_its_95_percent_t_interval_over_seeds() -> None:
    # sample std 0.125 over 3 seeds: half-width t(0.975, 2) * 0.125 / sqrt(3) = 0.3105
    assert interval_cell([0.75, 0.625, 0.5]) == "0.625 [0.314, 0.936]"
    assert interval_cell([0.75, float("nan"), 0.5], digits=2) == "0.62 [-0.96, 2.21]"
    assert interval_cell([0.4]) == "0.400 (1 seed)"
    assert interval_cell([]) == "n/a"


def test_report_tables_give_the_mean_and_its_interval_over_seeds(partial_report: Path) -> None:
    text = partial_report.read_text()
    assert "Runs finished: 6 of 9 planned" in text
    assert "**PARTIAL**" in text
    assert "| start (shared) | - | 0.250 | 0.125 | 0.188 |" in text
    assert "| eppo | 3 | 0.750 [0.129, 1.371] | 0.500 [0.500, 0.500] | 0.625 [0.314, 0.936] |" in (
        text
    )
    assert (
        "| grpo_tan | 3 | 0.500 [0.500, 0.500] | 0.250 [0.250, 0.250] | 0.375 [0.375, 0.375] |"
        in (text)
    )
    assert "| rloo | 0 | n/a | n/a | n/a |" in text
    assert (
        "| grpo_tan | 3 | 3.0 [3.0, 3.0] | 0.263 [0.263, 0.263] | 0.500 [0.500, 0.500] | "
        "0.0800 [0.0800, 0.0800] | 0.0500 [0.0500, 0.0500] |" in text
    )
    assert "| eppo | 3 | 0.0 [0.0, 0.0] |" in text
    assert "95% Student-t interval" in text


def test_report_pairs_every_method_with_its_reference_seed_by_seed(partial_report: Path) -> None:
    text = partial_report.read_text()
    # eppo - grpo_tan per seed: os +0.5, +0.25, 0; db +0.25 each; mean over tasks +0.375, +0.25,
    # +0.125. Two-sided exact sign-flip p over 3 seeds: 2 * 1/8 when all differences agree.
    assert (
        "| eppo - grpo_tan | [0, 1, 2] | +0.250 [-0.371, +0.871], p = 0.5 | "
        "+0.250 [+0.250, +0.250], p = 0.25 | +0.250 [-0.061, +0.561], p = 0.25 | exact |"
    ) in text
    assert "| rloo - grpo_tan | [] | not enough seeds (0 common) |" in text
    assert "Paired against eppo (EPPO):" in text and "Paired against rloo (RLOO):" in text
    assert "| eppo - grpo_tan | [0, 1, 2] | -3.000 [-3.000, -3.000], p = 0.25 |" in text


def test_report_gives_the_clipped_share_and_clip_range_per_task(partial_report: Path) -> None:
    text = partial_report.read_text()
    # handmade clip range 0.2 +- 0.05 by the task's side of the mean entropy: os above on 5
    # of 10 steps and db on 4 with the crossing curves; os always above with the banded ones
    assert (
        "| grpo_tan | 3 | 0.200 [0.200, 0.200] | 0.190 [0.190, 0.190] | 0.195 [0.195, 0.195] |"
        in (text)
    )
    assert (
        "| eppo | 3 | 0.250 [0.250, 0.250] | 0.150 [0.150, 0.150] | 0.200 [0.200, 0.200] |" in text
    )
    assert "| grpo_tan | 3 | 0.0500 [0.0500, 0.0500] | 0.0500 [0.0500, 0.0500] |" in text


def test_report_checks_the_papers_claims(partial_report: Path) -> None:
    text = partial_report.read_text()
    assert (
        "| Table 1 | eppo > grpo_tan on mean_success | EPPO 54.3 vs AgentRL 51.6 AVG | "
        "0.625 [0.314, 0.936] vs 0.375 [0.375, 0.375] | [0, 1, 2] | +0.250 [-0.061, +0.561] | "
        "0.125 | 1 | paired permutation test, one-sided, exact (smallest p possible 0.125) | "
        "not resolved at this scale |" in text
    )
    assert "| Fig. 1c | eppo < grpo_tan on crossover_count | fewer crossovers |" in text
    assert (
        "| Table 6 | rloo_eppo > rloo on mean_success | 57.3 vs 55.9 (three-task) | n/a vs n/a | "
        "[] | - | - | - | not enough seeds (0 common) | not resolved at this scale |" in text
    )
    claims = json.loads((partial_report.parent / "report.json").read_text())["claims"]
    assert [c["verdict"] for c in claims] == ["not resolved at this scale"] * 7
    assert claims[0]["claimed"]["p_value"] == 0.125
    assert claims[0]["claimed"]["alternative"] == "greater"
    assert claims[4]["claimed"]["alternative"] == "less"  # fewer crossovers
    assert claims[4]["claimed"]["differences"] == [-3.0, -3.0, -3.0]


def seeds_of(values: list[float], run_dir: Path, first: int = 0) -> list[SeedResult]:
    return [
        SeedResult(first + k, run_dir, {"mean_success": v}, {"crossover_count": 10 * v})
        for k, v in enumerate(values)
    ]


def test_a_claim_is_decided_by_the_one_sided_paired_test_over_seeds(tmp_path: Path) -> None:
    table1, crossovers = PAPER_CLAIMS[0], PAPER_CLAIMS[4]
    high = seeds_of([0.5, 0.6, 0.7, 0.8, 0.9], tmp_path)
    low = seeds_of([0.4, 0.5, 0.6, 0.6, 0.7], tmp_path)
    supported = claim_verdict(table1, {"eppo": high, "grpo_tan": low})
    assert supported.verdict == "supported"
    assert supported.claimed.test is not None and supported.claimed.test.p_value == 1 / 32
    assert supported.claimed.test.method == "exact"
    assert supported.smallest_p == 1 / 32
    # fewer crossovers is the claim: eppo's are higher here
    assert claim_verdict(crossovers, {"eppo": high, "grpo_tan": low}).verdict == "contradicted"
    assert claim_verdict(table1, {"eppo": low, "grpo_tan": high}).verdict == "contradicted"
    assert claim_verdict(crossovers, {"eppo": low, "grpo_tan": high}).verdict == "supported"
    # five seeds, one against the rest: p = 2/32
    mixed = seeds_of([0.5, 0.6, 0.7, 0.8, 0.5], tmp_path)
    assert claim_verdict(table1, {"eppo": mixed, "grpo_tan": low}).verdict == (
        "not resolved at this scale"
    )
    # three seeds all one way: p = 1/8 at best
    three = claim_verdict(table1, {"eppo": high[:3], "grpo_tan": low[:3]})
    assert three.verdict == "not resolved at this scale" and three.smallest_p == 0.125
    one = claim_verdict(table1, {"eppo": high[:1], "grpo_tan": low[:1]})
    assert one.verdict == "not resolved at this scale" and one.claimed.test is None


def test_paired_tests_use_only_the_seeds_both_methods_finished(tmp_path: Path) -> None:
    ours = seeds_of([0.5, 0.6, 0.7, 0.8, 0.9], tmp_path)
    theirs = seeds_of([0.25, 0.5, 0.75], tmp_path)
    for result, seed in zip(theirs, (0, 2, 4), strict=True):
        result.seed = seed
    paired = paired_over_seeds({"a": ours, "b": theirs}, "a", "b", "mean_success")
    assert paired.seeds == (0, 2, 4)
    assert paired.differences == pytest.approx((0.25, 0.2, 0.15))
    assert paired.test is not None and paired.test.alternative == "two-sided"
    assert paired.test.p_value == 0.25
    assert paired_over_seeds({"a": ours, "b": theirs[:1]}, "a", "b", "mean_success").cell() == (
        "not enough seeds (1 common)"
    )


def test_report_lists_failed_runs_and_json_keeps_every_seed(tmp_path: Path) -> None:
    results = finished_runs(tmp_path / "runs")
    failures = {"rloo/seed0": "RuntimeError: out of memory"}
    text = write_compare_report(
        tmp_path / "out",
        results,
        planned_seeds={key: [0, 1, 2] for key in results},
        failures=failures,
    ).read_text()
    assert "- `rloo/seed0`: RuntimeError: out of memory" in text
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [r["seed"] for r in data["methods"]["eppo"]] == [0, 1, 2]
    assert data["methods"]["eppo"][0]["success"] == {"os": 1.0, "db": 0.5, "mean_success": 0.75}
    assert data["failures"] == failures
    assert data["planned_seeds"] == {key: [0, 1, 2] for key in results}
    eppo = data["intervals"]["methods"]["eppo"]["mean_success"]
    assert eppo["mean"] == 0.625 and eppo["n"] == 3 and eppo["std"] == 0.125
    assert eppo["low"] == pytest.approx(0.3145, abs=1e-4)
    assert data["intervals"]["methods"]["grpo_tan"]["clip_eps/db"]["mean"] == pytest.approx(0.19)
    pair = next(
        p
        for p in data["paired"]
        if (p["method"], p["reference"], p["quantity"]) == ("eppo", "grpo_tan", "mean_success")
    )
    assert pair["seeds"] == [0, 1, 2] and pair["p_value"] == 0.25
    assert pair["test"] == "paired permutation test, exact"


def test_report_draws_the_comparison_plots(partial_report: Path) -> None:
    text = partial_report.read_text()
    plots = partial_report.parent / "plots"
    for stem in ("diagnostics", "success", "entropy_by_task", "entropy", "clip_eps", "zscore"):
        assert (plots / f"{stem}.png").stat().st_size > 1000
        assert (plots / f"{stem}.svg").exists()
        assert f"(plots/{stem}.png)" in text


def test_a_report_with_every_run_finished_says_complete(tmp_path: Path) -> None:
    results = finished_runs(tmp_path / "runs")
    del results["rloo"]
    text = write_compare_report(
        tmp_path / "out", results, planned_seeds={key: [0, 1, 2] for key in results}
    ).read_text()
    assert "Runs finished: 6 of 6 planned (2 methods x seeds [0, 1, 2]): **complete**." in text


def test_runs_are_planned_per_method_and_the_start_gives_the_tasks(tmp_path: Path) -> None:
    planned = {"grpo_tan": [0, 1, 2, 3, 4], "eppo": [0, 1, 2, 3, 4], "rloo": [0, 1, 2]}
    text = write_compare_report(
        tmp_path / "out",
        {key: [] for key in planned},
        planned_seeds=planned,
        start_success={"os": 0.5, "db": 0.25},
        start_name="agentgym-tiny",
    ).read_text()
    assert (
        "Runs finished: 0 of 13 planned (2 methods x seeds [0, 1, 2, 3, 4] + 1 method x seeds "
        "[0, 1, 2]): **PARTIAL**." in text
    )
    assert "| eppo (EPPO) | [0, 1, 2, 3, 4] | [] | [0, 1, 2, 3, 4] |" in text
    assert "| method | seeds | os | db | mean over tasks |" in text
    assert "| start (shared) | - | 0.500 | 0.250 | 0.375 |" in text
    assert "(`agentgym-tiny`)" in text


def test_within_each_seed_the_evaluations_are_paired_instance_by_instance(tmp_path: Path) -> None:
    """eppo solves 4 of 8 os instances that grpo_tan fails, db is 0 for both: the mean over
    tasks rises 0.25; exact one-sided p = 1/16 (the four flips), two-sided 1/8."""
    results: dict[str, list[SeedResult]] = {"grpo_tan": [], "eppo": []}
    for seed in (0, 1):
        for method, solved in (("grpo_tan", 0), ("eppo", 4)):
            run = write_run(tmp_path / f"runs/{method}/seed{seed}")
            outcomes = {"os": [[k < solved] for k in range(8)], "db": [[False]] * 8}
            results[method].append(collect_seed(seed, write_episodes(run, outcomes)))
    text = write_compare_report(
        tmp_path / "out", results, planned_seeds={key: [0, 1] for key in results}
    ).read_text()
    assert "| eppo - grpo_tan | 0 | 16 | +0.250 | 0.125 | exact |" in text
    assert "| eppo - grpo_tan | 1 | 16 | +0.250 | 0.125 | exact |" in text
    level = json.loads((tmp_path / "out" / "report.json").read_text())["instance_level"]
    assert [(p["seed"], p["p_value"]) for p in level] == [(0, 0.125), (1, 0.125)]


ELSEWHERE = "trained on another machine, whose checkpoints did not travel"


def confirmed(root: Path, method: str, seed: int, solved: dict[str, int]) -> SeedResult:
    """A run's exported confirmation on test: 8 instances per task played once, the first
    ``solved[task]`` of them solved."""
    outcomes = {task: [[k < n] for k in range(8)] for task, n in solved.items()}
    folder = write_episodes(
        root / f"{method}/seed{seed}/confirm-test",
        outcomes,
        stage="base",
        split="test",
    )
    return collect_confirmation(seed, folder, "test")


def confirmation_report(
    root: Path, eppo_seeds: dict[int, dict[str, int]], missing: dict[str, dict[int, str]]
) -> tuple[str, dict]:
    """The report of :func:`finished_runs` with grpo_tan confirmed on seeds 1 and 2 (os 2
    of 8 solved, db 0) and eppo on ``eppo_seeds``; its text and its JSON's confirmation."""
    grpo = [confirmed(root / "grid", "grpo_tan", s, {"os": 2, "db": 0}) for s in (1, 2)]
    eppo = [confirmed(root / "grid", "eppo", s, solved) for s, solved in eppo_seeds.items()]
    results = finished_runs(root / "runs")
    del results["rloo"]
    text = write_compare_report(
        root / "out",
        results,
        planned_seeds={key: [0, 1, 2] for key in results},
        confirmation=Confirmation("test", {"grpo_tan": grpo, "eppo": eppo}, missing),
    ).read_text()
    return text, json.loads((root / "out" / "report.json").read_text())["confirmation"]


def test_the_confirmation_repeats_the_primary_test_on_the_seeds_confirmed(
    tmp_path: Path,
) -> None:
    """Seeds 1 and 2 confirmed for both methods, seed 0 trained elsewhere. eppo - grpo_tan
    on the mean over tasks: +0.375 and +0.25; one-sided exact p over 2 seeds: 1/4."""
    text, data = confirmation_report(
        tmp_path,
        {1: {"os": 6, "db": 2}, 2: {"os": 4, "db": 2}},
        {"grpo_tan": {0: ELSEWHERE}, "eppo": {0: ELSEWHERE}},
    )
    section = text.split("## Confirmation on the test split")[1]
    assert "Confirmed: grpo_tan (AgentRL) seeds [1, 2]; eppo (EPPO) seeds [1, 2]." in section
    assert f"- grpo_tan (AgentRL), seeds [0]: {ELSEWHERE}" in section
    assert f"- eppo (EPPO), seeds [0]: {ELSEWHERE}" in section
    # per seed: test success per task, its mean, and the same run's dev mean beside
    assert "| eppo (EPPO) | 1 | 0.750 | 0.250 | 0.500 | 0.625 |" in section
    assert "| eppo (EPPO) | 2 | 0.500 | 0.250 | 0.375 | 0.500 |" in section
    assert (
        "| eppo (EPPO) | mean (2 seeds) | 0.625 [-0.963, 2.213] | 0.250 [0.250, 0.250] | "
        "0.438 [-0.357, 1.232] | 0.562 [-0.232, 1.357] |" in section
    )
    assert "| grpo_tan (AgentRL) | 1 | 0.250 | 0.000 | 0.125 | 0.375 |" in section
    assert (
        "| Table 1 | eppo > grpo_tan on mean_success | EPPO 54.3 vs AgentRL 51.6 AVG | "
        "0.438 [-0.357, 1.232] vs 0.125 [0.125, 0.125] | [1, 2] | +0.312 [-0.482, +1.107] | "
        "0.25 | 1 | paired permutation test, one-sided, exact (smallest p possible 0.25) | "
        "not resolved at this scale |" in section
    )
    assert "| eppo - grpo_tan | [1, 2] |" in section
    # within a seed, the test instances paired: seed 1 flips 4 os and 2 db instances
    assert "played the same test instances" in section
    assert "| eppo - grpo_tan | 1 | 16 | +0.375 | 0.0312 | exact |" in section
    assert "| eppo - grpo_tan | 2 | 16 | +0.250 | 0.125 | exact |" in section
    assert data["split"] == "test"
    assert [r["seed"] for r in data["methods"]["eppo"]] == [1, 2]
    assert data["missing"] == {"grpo_tan": {"0": ELSEWHERE}, "eppo": {"0": ELSEWHERE}}
    assert data["intervals"]["methods"]["eppo"]["mean_success"]["mean"] == 0.4375
    (claim,) = data["claims"]
    assert claim["claimed"]["seeds"] == [1, 2] and claim["claimed"]["p_value"] == 0.25
    assert claim["claimed"]["alternative"] == "greater"
    assert [(p["seed"], p["instances"]) for p in data["instance_level"]] == [(1, 16), (2, 16)]


def test_a_seed_without_its_confirmation_is_left_out_of_the_pairs_and_named(
    tmp_path: Path,
) -> None:
    text, data = confirmation_report(
        tmp_path,
        {1: {"os": 6, "db": 2}},
        {"grpo_tan": {0: ELSEWHERE}, "eppo": {0: ELSEWHERE, 2: "not finished yet"}},
    )
    section = text.split("## Confirmation on the test split")[1]
    assert "Confirmed: grpo_tan (AgentRL) seeds [1, 2]; eppo (EPPO) seeds [1]." in section
    assert "- eppo (EPPO), seeds [2]: not finished yet" in section
    assert "| eppo (EPPO) | mean (1 seed) | 0.750 (1 seed) |" in section
    assert "| [1] | - | - | - | not enough seeds (1 common) | not resolved at this scale |" in (
        section
    )
    assert "| eppo - grpo_tan | 1 | 16 | +0.375 |" in section
    assert "| eppo - grpo_tan | 2 |" not in section
    assert data["claims"][0]["claimed"]["test"] == "not enough seeds"
    assert data["missing"]["eppo"] == {"0": ELSEWHERE, "2": "not finished yet"}


def test_without_any_confirmation_the_section_says_so(tmp_path: Path) -> None:
    results = finished_runs(tmp_path / "runs")
    missing = {m: dict.fromkeys((0, 1, 2), ELSEWHERE) for m in ("grpo_tan", "eppo")}
    text = write_compare_report(
        tmp_path / "out",
        results,
        planned_seeds={key: [0, 1, 2] for key in results},
        confirmation=Confirmation("test", {"grpo_tan": [], "eppo": []}, missing),
    ).read_text()
    section = text.split("## Confirmation on the test split")[1].split("\n## ")[0]
    assert "No headline run has been evaluated on the test split yet." in section
    assert f"- grpo_tan (AgentRL), seeds [0, 1, 2]: {ELSEWHERE}" in section
    assert "| method | seed |" not in section and "Table 1" not in section
    data = json.loads((tmp_path / "out" / "report.json").read_text())["confirmation"]
    assert data["methods"] == {"grpo_tan": [], "eppo": []}
    assert data["claims"][0]["claimed"]["test"] == "not enough seeds"


def test_a_comparison_without_a_confirmation_split_has_no_such_section(
    partial_report: Path,
) -> None:
    assert "Confirmation on" not in partial_report.read_text()
    assert json.loads((partial_report.parent / "report.json").read_text())["confirmation"] is None


def test_a_confirmation_on_another_split_is_refused(tmp_path: Path) -> None:
    folder = write_episodes(tmp_path, {"os": [[True]]}, stage="base", split="dev")
    with pytest.raises(ValueError, match=r"evaluated on 'dev', not the 'test' split"):
        collect_confirmation(0, folder, "test")
    with pytest.raises(FileNotFoundError, match=r"no eval_base\.json"):
        collect_confirmation(0, tmp_path / "empty", "test")


def test_the_report_says_which_instances_each_seed_played(tmp_path: Path) -> None:
    """os: the same 8 instances in both seeds; db: seed 1 plays ids 4-11 against seed 0's
    0-7, so 4 are shared and 12 played in all. The tests over seeds pair seeds."""
    results: dict[str, list[SeedResult]] = {"grpo_tan": [], "eppo": []}
    for seed in (0, 1):
        for method in results:
            run = write_run(tmp_path / f"runs/{method}/seed{seed}")
            outcomes = {"os": [[True]] * 8, "db": [[False]] * 8}
            write_episodes(run, outcomes, first_ids={"db": 4 * seed})
            results[method].append(collect_seed(seed, run))
    text = write_compare_report(
        tmp_path / "out", results, planned_seeds={key: [0, 1] for key in results}
    ).read_text()
    section = text.split("## Evaluated instances")[1].split("\n## ")[0]
    assert (
        "The seeds did not play the same dev instances: those of db changed with the seed "
        "(each run drew them with its own seed); those of os did not. A test paired over "
        "seeds therefore pairs seeds, not instances" in section
    )
    assert "Within one seed every method played the same instances." in section
    assert "| os | [0, 1] | 8 | 8 | 8 | 8 |" in section
    assert "| db | [0, 1] | 8 | 4 | 12 | 4 |" in section
    assert "Within one seed both runs played the same dev instances" in text
    instances = json.loads((tmp_path / "out" / "report.json").read_text())["instances"]
    assert instances["varying_tasks"] == ["db"] and instances["mismatched"] == []
    assert instances["tasks"]["db"]["seeds"]["1"][0] == "db-dev-00004"
    assert instances["tasks"]["db"]["in_every_seed"] == 4


def test_a_method_that_played_other_instances_within_a_seed_is_named(tmp_path: Path) -> None:
    results: dict[str, list[SeedResult]] = {"grpo_tan": [], "eppo": []}
    for method, first in (("grpo_tan", 0), ("eppo", 2)):
        run = write_run(tmp_path / f"runs/{method}/seed0")
        write_episodes(run, {"os": [[True]] * 4}, first_ids={"os": first})
        results[method].append(collect_seed(0, run))
    text = write_compare_report(
        tmp_path / "out", results, planned_seeds={key: [0] for key in results}
    ).read_text()
    assert "Within a seed the methods did not all play the same instances (eppo seed 0)" in text
    # the instance-level test pairs the 2 instances both runs played
    assert "Within one seed, on the dev instances both runs played:" in text
    assert "| eppo - grpo_tan | 0 | 2 |" in text


def ablation_runs(root: Path, ablation_eps: float) -> dict[str, list[SeedResult]]:
    """AgentRL at its fixed 0.2, EPPO, and the global-entropy ablation at ``ablation_eps``."""
    return {
        method: [
            collect_seed(s, write_run(root / f"{method}/seed{s}", clip_eps=eps)) for s in range(2)
        ]
        for method, eps in (("grpo_tan", 0.2), ("eppo", None), ("eppo_no_taskwise", ablation_eps))
    }


def test_a_global_entropy_ablation_whose_clip_stays_fixed_is_named_agentrl(tmp_path: Path) -> None:
    results = ablation_runs(tmp_path / "runs", 0.1995)
    text = write_compare_report(
        tmp_path / "out", results, planned_seeds={key: [0, 1] for key in results}
    ).read_text()
    table4 = text.split("## Table 4")[1].split("\n## ")[0]
    assert (
        "Over every step of its 2 runs the clip range stayed in [0.1995, 0.1995], within 1% of "
        "grpo_tan (AgentRL)'s fixed 0.2000: in effect it is AgentRL. Its differences from "
        "grpo_tan (Table 1, mean over tasks: +0.000 [+0.000, +0.000], p = 1) measure "
        "run-to-run noise" in table4
    )
    spans = json.loads((tmp_path / "out" / "report.json").read_text())["clip_range_span"]
    assert spans["eppo_no_taskwise"] == [0.1995, 0.1995]
    assert spans["eppo"] == pytest.approx([0.15, 0.25])


def test_a_global_entropy_ablation_whose_clip_moves_is_not_called_agentrl(tmp_path: Path) -> None:
    results = ablation_runs(tmp_path / "runs", 0.25)
    text = write_compare_report(
        tmp_path / "out", results, planned_seeds={key: [0, 1] for key in results}
    ).read_text()
    assert "clip range stayed in [0.2500, 0.2500], against grpo_tan (AgentRL)'s fixed 0.2000." in (
        text
    )
    assert "in effect it is AgentRL" not in text


def test_the_papers_gain_is_set_against_our_interval(tmp_path: Path, partial_report: Path) -> None:
    # partial_report: eppo - grpo_tan +0.250 [-0.061, +0.561] holds the paper's +0.027
    assert (
        "Table 1, eppo - grpo_tan on mean_success: the paper's gain is +0.027 (EPPO 54.3 vs "
        "AgentRL 51.6 AVG); our 95% interval of the difference over 3 seeds, [-0.061, +0.561], "
        "contains it: a gain as large as the paper's is not excluded." in partial_report.read_text()
    )
    # eppo below grpo_tan by 0.125, 0.1, 0.075 over tasks: the interval ends below +0.027
    results = {
        "grpo_tan": [collect_seed(s, write_run(tmp_path / f"g{s}")) for s in range(3)],
        "eppo": [
            collect_seed(s, write_run(tmp_path / f"e{s}", after_rl={"os": os, "db": 0.25}))
            for s, os in enumerate((0.25, 0.3, 0.35))
        ],
    }
    text = write_compare_report(
        tmp_path / "out", results, planned_seeds={key: [0, 1, 2] for key in results}
    ).read_text()
    assert "[-0.162, -0.038], ends below it: a gain as large as the paper's is excluded" in text
    claims = json.loads((tmp_path / "out" / "report.json").read_text())["claims"]
    assert claims[0]["paper_gain"] == 0.027 and claims[1]["paper_gain"] is None


# Late spikes (window: steps 8-10 of 10): os rises 0.1 into step 9 in every run; webshop,
# a task the start never solves, rises 0.5 into step 9 under eppo only.
QUIET = [1.0] * 10
SPIKE = [1.0] * 8 + [1.1, 1.0]
LOUD = [1.0] * 8 + [1.5, 1.0]


def test_figure_1c_claims_are_judged_again_on_the_tasks_with_signal(tmp_path: Path) -> None:
    curves = {
        "grpo_tan": {"os": SPIKE, "db": QUIET, "webshop": QUIET},
        "eppo": {"os": SPIKE, "db": QUIET, "webshop": LOUD},
    }
    results = {
        method: [
            collect_seed(s, write_run(tmp_path / f"runs/{method}/seed{s}", entropy=curves[method]))
            for s in range(5)
        ]
        for method in curves
    }
    text = write_compare_report(
        tmp_path / "out",
        results,
        planned_seeds={key: list(range(5)) for key in results},
        start_success={"os": 0.5, "db": 0.25, "webshop": 0.0},
    ).read_text()
    section = text.split("### Figure 1(c)'s claims on the tasks with signal")[1].split("\n## ")[0]
    assert "The start never solves webshop (dev success 0)" in section
    assert "at most 5.00% of their loss tokens in any method (5.00%-5.00% on os, db;" in section
    # every task: eppo's late spike 0.5 against 0.1 in all five seeds; os and db alone: equal
    every = text.split("## The paper's claims on our numbers")[1].split("###")[0]
    assert "| +0.400 [+0.400, +0.400] | 1 | 0.0312 |" in every and "| contradicted |" in every
    assert "| eppo < grpo_tan on late_spike_max | weaker late spikes | 0.100 [" in section
    assert "| +0.000 [+0.000, +0.000] | 1 | 1 |" in section
    assert "Runs whose largest late spike came from a task without signal: eppo seed 0 " in section
    assert (
        "eppo < grpo_tan on late_spike_max (Fig. 1c): *contradicted* on every task, *not "
        "resolved at this scale* on os, db. The verdict on the tasks with signal stands" in section
    )
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    on_signal = data["claims_on_tasks_with_signal"]
    assert on_signal["tasks"] == ["os", "db"]
    assert [c["verdict"] for c in on_signal["claims"]][-1] == "not resolved at this scale"


def test_without_a_task_lacking_signal_there_is_no_second_judgement(partial_report: Path) -> None:
    assert "on the tasks with signal" not in partial_report.read_text()
    data = json.loads((partial_report.parent / "report.json").read_text())
    assert data["claims_on_tasks_with_signal"] is None
