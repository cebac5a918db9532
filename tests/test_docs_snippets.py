"""The README's and docs' code blocks, extracted from the Markdown and run.

* Every ```` ```python ```` block runs as written, as its own script (``__name__`` is
  ``"__main__"``), in a scratch folder that has the repository's ``configs/`` linked in,
  so paths written from the repository root work and nothing is written into it. A
  block that stops working fails here.
* A block that needs what tests do not have (a remote server, a GPU, AgentBench's own
  files, or names defined by a larger program around it) carries a visible marker on
  the line before its fence, ``<!-- not-tested: reason -->``; :data:`NOT_TESTED` lists
  each with its reason, so a marker cannot appear or go unnoticed.
* Shell blocks: every ``agentgym-eppo <subcommand>`` must name a subcommand of the CLI and
  use only options that subcommand has; every ``make <target>`` a Makefile target;
  every ``python -m <module>`` an importable module.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYTHON_LANGUAGES = ("python", "py")
SHELL_LANGUAGES = ("bash", "sh", "shell", "console")
SNIPPET_TIMEOUT_S = 600
SNIPPET_WORKERS = 2
"""Python snippets run at once, each its own process (they share nothing: scratch
folders, port 0, per-episode databases); the CI has two cores."""

NOT_TESTED: frozenset[tuple[str, str]] = frozenset(
    {
        (
            "docs/diagnostics.md",
            "needs a finished run's folder; tests/test_trainer_cli_entry_points.py runs diagnose on a real two-step run",
        ),
        (
            "docs/scaling.md",
            "joins a Ray cluster or runs under torchrun on every rank; tests/test_scale_ray.py and tests/support/scale_fsdp_worker.py run the same calls",
        ),
        (
            "README.md",
            "a fragment: `actions` are the model's replies, made by a rollout loop "
            "around it (docs/vector.md has the runnable version)",
        ),
        (
            "docs/db.md",
            "needs MariaDB/MySQL and PostgreSQL servers at the addresses shown "
            "(tests/test_db_servers.py runs both backends against local servers)",
        ),
        (
            "docs/kg.md",
            "needs your own graph file, AgentBench's task files and a SPARQL server",
        ),
        (
            "docs/os.md",
            "needs AgentBench's task files and scripts and a Docker daemon",
        ),
        (
            "docs/vector.md",
            "downloads a model from the Hugging Face Hub and trains; "
            "tests/test_wrappers_trl.py::test_grpo_trainer_trains_a_tiny_model_on_two_environments "
            "runs the same wiring on a tiny local model",
        ),
    }
)
"""(document, reason) of every block marked ``<!-- not-tested: reason -->``."""

_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<language>[\w+-]*)[ \t]*$")
_MARKER = re.compile(r"^\s*<!--\s*not-tested:\s*(?P<reason>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Snippet:
    document: str
    line: int
    language: str
    code: str
    not_tested: str | None

    @property
    def name(self) -> str:
        return f"{self.document}:{self.line}"


def extract(path: Path) -> list[Snippet]:
    """Every fenced block of ``path``, with the not-tested reason on the line before it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    document = path.relative_to(ROOT).as_posix()
    snippets: list[Snippet] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent = opening["indent"]
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        body = [line.removeprefix(indent) for line in lines[index + 1 : end]]
        previous = next((line for line in reversed(lines[:index]) if line.strip()), "")
        marker = _MARKER.match(previous)
        snippets.append(
            Snippet(
                document,
                index + 1,
                opening["language"].lower(),
                "\n".join(body) + "\n",
                marker["reason"] if marker else None,
            )
        )
        index = end + 1
    return snippets


SNIPPETS = [snippet for path in DOCUMENTS for snippet in extract(path)]
PYTHON = [s for s in SNIPPETS if s.language in PYTHON_LANGUAGES]
SHELL = [s for s in SNIPPETS if s.language in SHELL_LANGUAGES]


def test_snippets_were_found() -> None:
    documents = {s.document for s in PYTHON}
    assert {"README.md", "docs/webshop.md", "docs/vector.md"} <= documents


def test_not_tested_snippets_are_marked_with_reasons_and_listed() -> None:
    marked = {(s.document, s.not_tested) for s in SNIPPETS if s.not_tested is not None}
    assert all(reason for _, reason in marked), "a not-tested marker needs a reason"
    assert marked == NOT_TESTED, (
        "the <!-- not-tested: reason --> markers in the Markdown and NOT_TESTED differ: "
        f"only in the Markdown {sorted(marked - NOT_TESTED)}, "
        f"only in NOT_TESTED {sorted(NOT_TESTED - marked)}"
    )


def run_snippet(snippet: Snippet, folder: Path) -> subprocess.CompletedProcess[str]:
    """Run ``snippet`` as its own script in ``folder`` (``configs/`` linked in)."""
    script = folder / "snippet.py"
    script.write_text(snippet.code, encoding="utf-8")
    (folder / "configs").symlink_to(ROOT / "configs", target_is_directory=True)
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=folder,
        env=environment,
        capture_output=True,
        text=True,
        timeout=SNIPPET_TIMEOUT_S,
        check=False,
    )


@pytest.fixture(scope="module")
def snippet_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    """The selected Python snippets, started :data:`SNIPPET_WORKERS` at a time in document
    order when the first of their tests runs; each test waits for its own."""
    selected = [
        item.callspec.params["snippet"]
        for item in request.session.items
        if isinstance(item, pytest.Function) and item.obj is test_python_snippet_runs_as_written
    ]
    with ThreadPoolExecutor(SNIPPET_WORKERS) as pool:
        runs = {
            snippet.name: pool.submit(run_snippet, snippet, tmp_path_factory.mktemp("snippet"))
            for snippet in selected
        }
        yield runs
        for run in runs.values():
            run.cancel()  # what a stopped session left unstarted


@pytest.mark.parametrize(
    "snippet", [s for s in PYTHON if s.not_tested is None], ids=lambda s: s.name
)
def test_python_snippet_runs_as_written(
    snippet: Snippet, snippet_runs: dict[str, Future[subprocess.CompletedProcess[str]]]
) -> None:
    result = snippet_runs[snippet.name].result()
    assert result.returncode == 0, (
        f"{snippet.name}: the snippet failed (exit {result.returncode}); mark it "
        "<!-- not-tested: reason --> only if it needs what tests cannot have.\n"
        f"{result.stderr[-3000:]}"
    )


# ------------------------------------------------------------------------ shell blocks


def shell_commands(snippet: Snippet) -> list[list[str]]:
    """Each command line of a shell block as words, comments and prompts dropped."""
    commands = []
    for line in snippet.code.replace("\\\n", " ").splitlines():
        line = line.strip().removeprefix("$ ")
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError:  # an unbalanced quote in prose-like lines: check what splits
            words = line.split("#", 1)[0].split()
        commands.append(words)
    return commands


def invocations(program: str) -> list[tuple[str, list[str]]]:
    """(block, the words after ``program``) for every call of ``program`` in shell blocks."""
    found = []
    for snippet in SHELL:
        for words in shell_commands(snippet):
            for position, word in enumerate(words):
                if word == program or word.endswith(f"/{program}"):
                    found.append((snippet.name, words[position + 1 :]))
    return found


def cli_subcommands() -> dict[str, set[str]]:
    """``{subcommand: its option strings}`` from the CLI's own parser."""
    import argparse

    from agentgym_eppo.trainer.cli import build_parser

    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {
        name: set(sub._option_string_actions)
        for action in actions
        for name, sub in action.choices.items()
    }


def test_shell_blocks_name_real_cli_subcommands_and_options() -> None:
    commands = cli_subcommands()
    calls = invocations("agentgym-eppo")
    assert calls, "no agentgym-eppo command found in the docs' shell blocks"
    problems = []
    for where, words in calls:
        if not words or words[0] not in commands:
            problems.append(f"{where}: unknown subcommand {words[:1]}; known: {sorted(commands)}")
            continue
        for word in words[1:]:
            option = word.split("=", 1)[0]
            if option.startswith("--") and option not in commands[words[0]]:
                problems.append(f"{where}: `agentgym-eppo {words[0]}` has no option {option}")
    assert not problems, "\n".join(problems)


def test_shell_blocks_name_real_make_targets_and_modules() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w.-]+)\s*:(?!=)", makefile, flags=re.M))
    problems = [
        f"{where}: no Makefile target {words[0]!r}"
        for where, words in invocations("make")
        if words and not words[0].startswith("-") and words[0] not in targets
    ]
    for where, words in invocations("python") + invocations("python3"):
        if len(words) >= 2 and words[0] == "-m":
            module = words[1]
            if module not in ("venv", "pip", "pytest") and importlib.util.find_spec(module) is None:
                problems.append(f"{where}: no module {module!r}")
    assert not problems, "\n".join(problems)
