"""A benchmark rewrites its report without losing what was written into it by hand
(``benchmarks/report.py``): the generated part is replaced, the part after the kept marker
survives, every ``bench_<name>.py`` writes through it, and the committed reports are laid
out as a rewrite leaves them. No benchmark is run."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from benchmarks import bench_reliability
from benchmarks.report import KEPT_MARKER, report_text, write_generated

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
RESULTS = BENCHMARKS / "results"
HAND_WRITTEN = f"{KEPT_MARKER}\n\n## The run before\n\nHalf as fast (abc1234).\n"


def test_a_rewrite_replaces_the_generated_part_and_keeps_the_hand_written_one(
    tmp_path: Path,
) -> None:
    report = tmp_path / "results" / "speed.md"
    write_generated(report, "# Speed\n\n| steps/s | 120 |\n")
    assert report.read_text(encoding="utf-8") == "# Speed\n\n| steps/s | 120 |\n"
    report.write_text(report.read_text(encoding="utf-8") + "\n" + HAND_WRITTEN, encoding="utf-8")

    write_generated(report, "# Speed\n\n| steps/s | 150 |")
    assert report.read_text(encoding="utf-8") == "# Speed\n\n| steps/s | 150 |\n\n" + HAND_WRITTEN
    write_generated(report, "# Speed\n\n| steps/s | 180 |\n")
    assert report.read_text(encoding="utf-8") == "# Speed\n\n| steps/s | 180 |\n\n" + HAND_WRITTEN


def test_without_the_marker_the_whole_report_is_generated() -> None:
    old = "# Speed\n\n| steps/s | 120 |\n\n## Reading\n\nwritten by hand, no marker\n"
    assert report_text("# Speed\n\n| steps/s | 150 |", old) == "# Speed\n\n| steps/s | 150 |\n"


def test_the_marker_counts_only_as_a_line_of_its_own() -> None:
    old = f"# Speed\n\nquoted: {KEPT_MARKER}\n"
    assert report_text("# Speed\n", old) == "# Speed\n"


def _calls(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }


@pytest.mark.parametrize("path", sorted(BENCHMARKS.glob("bench_*.py")), ids=lambda p: p.stem)
def test_every_benchmark_writes_its_report_through_the_helper(path: Path) -> None:
    assert "write_generated" in _calls(path)


KEPT = sorted(
    p for p in RESULTS.rglob("*.md") if KEPT_MARKER in p.read_text(encoding="utf-8").splitlines()
)
"""The committed reports with a hand-written part."""


@pytest.mark.parametrize("path", KEPT, ids=lambda p: str(p.relative_to(RESULTS)))
def test_committed_reports_are_laid_out_as_a_rewrite_leaves_them(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    generated = text.partition(f"\n{KEPT_MARKER}\n")[0]
    assert report_text(generated, text) == text


def test_the_reliability_figures_are_what_their_committed_runs_render(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``figures.md`` holds nothing the benchmark would drop: rendered again from the
    committed ``fuzz.json`` and ``soak.json``, it comes out byte for byte."""
    committed = bench_reliability.REPORT.read_text(encoding="utf-8")
    copy = tmp_path / "figures.md"
    shutil.copy(bench_reliability.REPORT, copy)
    monkeypatch.setattr(bench_reliability, "REPORT", copy)
    bench_reliability.write_report()
    assert copy.read_text(encoding="utf-8") == committed
