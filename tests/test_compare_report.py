"""The comparison report over hand-written runs whose success and diagnostics are known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from handmade_runs import write_run

from agentgym_eppo.trainer.analysis.compare_report import (
    PAPER_CLAIMS,
    SeedResult,
    claim_verdict,
    collect_seed,
    mean_std,
    write_compare_report,
)

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
        planned_seeds=[0, 1, 2],
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


def test_mean_std_uses_the_sample_std_over_seeds() -> None:
    assert mean_std([0.75, 0.625, 0.5]) == "0.625 ± 0.125"
    assert mean_std([0.4]) == "0.400 ± 0.000"
    assert mean_std([]) == "n/a"


def test_report_tables_give_mean_and_std_over_seeds(partial_report: Path) -> None:
    text = partial_report.read_text()
    assert "Runs finished: 6 of 9 planned" in text
    assert "**PARTIAL**" in text
    assert "| SFT start (shared) | - | 0.250 | 0.125 | 0.188 |" in text
    assert "| eppo | 3 | 0.750 ± 0.250 | 0.500 ± 0.000 | 0.625 ± 0.125 |" in text
    assert "| grpo_tan | 3 | 0.500 ± 0.000 | 0.250 ± 0.000 | 0.375 ± 0.000 |" in text
    assert "| rloo | 0 | n/a | n/a | n/a |" in text
    assert (
        "| grpo_tan | 3 | 3.0 ± 0.0 | 0.263 ± 0.000 | 0.500 ± 0.000 | 0.0800 ± 0.0000 | "
        "0.0500 ± 0.0000 |" in text
    )
    assert "| eppo | 3 | 0.0 ± 0.0 |" in text


def test_report_checks_the_papers_claims(partial_report: Path) -> None:
    text = partial_report.read_text()
    assert (
        "| Table 1 | eppo > grpo_tan on mean_success | EPPO 54.3 vs AgentRL 51.6 AVG | "
        "0.625 ± 0.125 vs 0.375 ± 0.000 | agrees |" in text
    )
    assert "| Fig. 1c | eppo < grpo_tan on crossover_count | fewer crossovers |" in text
    assert "| Table 6 | rloo_eppo > rloo on mean_success |" in text
    verdicts = json.loads((partial_report.parent / "report.json").read_text())["claims"]
    assert [v["verdict"] for v in verdicts] == [
        "agrees",
        "not run",
        "not run",
        "not run",
        "agrees",
        "agrees",
        "agrees",
    ]


def test_a_difference_smaller_than_the_seed_spread_is_marked_as_noise(tmp_path: Path) -> None:
    def seeds(values: list[float]) -> list[SeedResult]:
        return [SeedResult(k, tmp_path, {"mean_success": v}, {}) for k, v in enumerate(values)]

    table1 = PAPER_CLAIMS[0]
    assert claim_verdict(table1, {"eppo": seeds([0.5, 0.7]), "grpo_tan": seeds([0.55, 0.6])}) == (
        "agrees (within noise)"
    )
    assert claim_verdict(table1, {"eppo": seeds([0.3]), "grpo_tan": seeds([0.6])}) == (
        "disagrees (within noise)"
    )
    assert claim_verdict(table1, {"eppo": seeds([0.3, 0.3]), "grpo_tan": seeds([0.6, 0.6])}) == (
        "disagrees"
    )


def test_report_lists_failed_runs_and_json_keeps_every_seed(tmp_path: Path) -> None:
    results = finished_runs(tmp_path / "runs")
    failures = {"rloo/seed0": "RuntimeError: out of memory"}
    text = write_compare_report(
        tmp_path / "out", results, planned_seeds=[0, 1, 2], failures=failures
    ).read_text()
    assert "- `rloo/seed0`: RuntimeError: out of memory" in text
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [r["seed"] for r in data["methods"]["eppo"]] == [0, 1, 2]
    assert data["methods"]["eppo"][0]["success"] == {"os": 1.0, "db": 0.5, "mean_success": 0.75}
    assert data["failures"] == failures


def test_report_draws_the_comparison_plots(partial_report: Path) -> None:
    text = partial_report.read_text()
    plots = partial_report.parent / "plots"
    for stem in ("diagnostics", "success", "entropy", "clip_eps", "zscore"):
        assert (plots / f"{stem}.png").stat().st_size > 1000
        assert (plots / f"{stem}.svg").exists()
        assert f"(plots/{stem}.png)" in text


def test_a_report_with_every_run_finished_says_complete(tmp_path: Path) -> None:
    results = finished_runs(tmp_path / "runs")
    del results["rloo"]
    text = write_compare_report(tmp_path / "out", results, planned_seeds=[0, 1, 2]).read_text()
    assert "Runs finished: 6 of 6 planned (2 methods x seeds [0, 1, 2]): **complete**." in text
