r"""Writing a benchmark's report without losing what was written into it by hand.

A benchmark rewrites its report (``benchmarks/results/<name>.md``) from what it measured.
What a reader needs beside the figures (a reading of them, the runs before, a measurement
the script does not make) is written by hand below the line :data:`KEPT_MARKER` in the
same file, and every rewrite keeps it: the report is the generated text, ending in one
newline, then, when the old report had the marker, an empty line and the old report from
the marker line to its end, unchanged.

>>> old = "# Speed\n\n120 steps/s\n\n" + KEPT_MARKER + "\n\n## Reading\n\nFast enough.\n"
>>> print(report_text("# Speed\n\n150 steps/s", old), end="")
# Speed
<BLANKLINE>
150 steps/s
<BLANKLINE>
<!-- kept when the benchmark rewrites this report: not generated -->
<BLANKLINE>
## Reading
<BLANKLINE>
Fast enough.
>>> report_text("# Speed\n\n150 steps/s\n", "# Speed\n\n120 steps/s\n")
'# Speed\n\n150 steps/s\n'
"""

from __future__ import annotations

from pathlib import Path

KEPT_MARKER = "<!-- kept when the benchmark rewrites this report: not generated -->"
"""The line after which a report is written by hand; a benchmark never writes it."""


def report_text(generated: str, old: str) -> str:
    """The report to write: ``generated`` and the part of ``old`` from :data:`KEPT_MARKER`'s
    line on (nothing more when ``old`` has no such line)."""
    text = generated.rstrip("\n") + "\n"
    lines = old.splitlines(keepends=True)
    starts = [index for index, line in enumerate(lines) if line.rstrip("\r\n") == KEPT_MARKER]
    return text + "\n" + "".join(lines[starts[0] :]) if starts else text


def write_generated(path: Path, generated: str) -> None:
    """Rewrite the report at ``path`` with ``generated``, keeping its hand-written part
    (:func:`report_text`); the folder is made when missing."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report_text(generated, old), encoding="utf-8")
