"""The CI rule on skips (``tests/conftest.py``): under ``CI=true`` a skip whose reason is
not on ``CI_ALLOWED_SKIPS`` fails the run, and the failure names what is missing.

Each case is a real pytest run in a subprocess: tiny generated test files with the
repository's conftest loaded as a plugin (``-p conftest``), and the repository's own DB
tests pointed at a port where no server listens.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CI_ALLOWED_SKIPS

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent


def _pytest(
    args: list[str], cwd: Path, *, ci: bool, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), str(REPO_ROOT)])
    if ci:
        env["CI"] = "true"
    env.update(extra_env or {})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _run_generated(tmp_path: Path, source: str, *, ci: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_generated.py").write_text(source)
    return _pytest(["-p", "conftest", "test_generated.py"], tmp_path, ci=ci)


PLAIN_SKIP = """
import pytest

def test_runs():
    assert True

def test_needs_a_server():
    pytest.skip("no MariaDB server at mysql+pymysql://root@127.0.0.1:1/test (refused)")
"""

ALLOWED_SKIP = """
import pytest

def test_runs():
    assert True

@pytest.mark.skipif(True, reason="sglang is installed here: no missing-extra error to check")
def test_needs_no_sglang():
    pass
"""


def test_a_skip_not_on_the_allow_list_fails_a_ci_run_and_names_what_is_missing(
    tmp_path: Path,
) -> None:
    result = _run_generated(tmp_path, PLAIN_SKIP, ci=True)
    assert result.returncode == 1, result.stdout
    assert "1 passed, 1 skipped" in result.stdout
    assert "[NOT allowed in CI] no MariaDB server at" in result.stdout
    assert "CI=true: 1 skipped for reasons not on CI_ALLOWED_SKIPS" in result.stdout
    assert "Missing: MariaDB (1 skipped)" in result.stdout


def test_the_same_skip_outside_ci_passes_and_says_it_would_fail_ci(tmp_path: Path) -> None:
    result = _run_generated(tmp_path, PLAIN_SKIP, ci=False)
    assert result.returncode == 0, result.stdout
    assert "1 of these skips would fail a CI run (CI=true). Missing: MariaDB" in result.stdout


def test_an_allow_listed_skip_passes_a_ci_run(tmp_path: Path) -> None:
    result = _run_generated(tmp_path, ALLOWED_SKIP, ci=True)
    assert result.returncode == 0, result.stdout
    assert "[allowed in CI] sglang is installed here: no missing-extra error" in result.stdout
    assert "1 skipped, all on CI_ALLOWED_SKIPS" in result.stdout


def test_a_missing_package_skipped_at_collection_fails_a_ci_run(tmp_path: Path) -> None:
    source = 'import pytest\n\npytest.importorskip("no_such_package_here")\n\n\ndef test_x():\n    pass\n'
    result = _run_generated(tmp_path, source, ci=True)
    assert result.returncode == 1, result.stdout
    assert "could not import 'no_such_package_here'" in result.stdout
    assert "Missing: a Python package" in result.stdout


def test_a_failing_ci_run_keeps_its_own_exit_code(tmp_path: Path) -> None:
    result = _run_generated(
        tmp_path, PLAIN_SKIP + "\ndef test_fails():\n    assert False\n", ci=True
    )
    assert result.returncode == 1, result.stdout
    assert "1 failed, 1 passed, 1 skipped" in result.stdout


@pytest.mark.mariadb
def test_the_db_tests_pointed_at_a_closed_port_fail_a_ci_run_naming_mariadb(
    tmp_path: Path,
) -> None:
    # Held bound but not listening: connections are refused, and no other process can
    # start listening there while the run lasts.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"mysql+pymysql://root@127.0.0.1:{closed.getsockname()[1]}/test"
        result = _pytest(
            ["tests/test_db_servers.py", "tests/test_db_evaluation.py", "-m", "mariadb"],
            REPO_ROOT,
            ci=True,
            extra_env={"AGENTGYM_MARIADB_URL": url},
        )
    assert result.returncode == 1, result.stdout[-3000:]
    assert re.search(r" \d+ skipped, \d+ deselected in ", result.stdout), result.stdout[-3000:]
    assert f"[NOT allowed in CI] no MariaDB server at {url}" in result.stdout
    assert re.search(r"Missing: MariaDB \(\d+ skipped\)\.", result.stdout), result.stdout[-3000:]


def test_every_allow_list_entry_is_used_by_a_test_and_says_why() -> None:
    """An entry no test needs would only widen what CI lets through."""
    sources = "\n".join(path.read_text() for path in TESTS_DIR.glob("test_*.py"))
    sources = sources.replace(Path(__file__).read_text(), "")
    for pattern, why in CI_ALLOWED_SKIPS:
        match = LIBRARY_SKIP.match(pattern)
        if match and match["optional"]:
            # tests/test_doctests.py words this skip from the module and the missing name
            assert 'needs the optional {error.name}"' in sources, pattern
        else:
            assert re.search(pattern.removeprefix("^"), sources), f"{pattern!r} matches no skip"
        assert len(why) > 20, pattern


LIBRARY_SKIP = re.compile(
    r"^\^?((?P<missing>[A-Za-z_][\w.]*) is not installed|.* needs the optional (?P<optional>\w+))"
)


def importable_yet_allowed(entries: tuple[tuple[str, str], ...]) -> list[str]:
    """The modules that allow-list entries ("<module> is not installed", "... needs the
    optional <module>") excuse although they import in this venv, where their tests run."""
    modules = [
        match["missing"] or match["optional"]
        for pattern, _ in entries
        if (match := LIBRARY_SKIP.match(pattern))
    ]
    return [module for module in modules if importlib.util.find_spec(module) is not None]


def test_no_allowed_skip_excuses_a_library_that_imports_here() -> None:
    assert LIBRARY_SKIP.match(CI_ALLOWED_SKIPS[0][0])["optional"] == "verl"  # type: ignore[index]
    assert importable_yet_allowed(CI_ALLOWED_SKIPS) == []
    # the entries this list held while SkyRL-gym and verl were only stand-ins in CI: the
    # first is caught now that `make test` installs skyrl-gym into this venv
    former = (
        (r"^verl is not installed", "verl pins its own torch and inference engine"),
        (r"^skyrl_gym is not installed", "SkyRL-gym pins its own torch, as verl does"),
    )
    assert importable_yet_allowed(former) == ["skyrl_gym"]


def test_ci_runs_the_readme_test_command_with_ci_set() -> None:
    script = (REPO_ROOT / ".ci" / "run").read_text()
    assert re.search(r"^export CI=true$", script, re.MULTILINE)
    assert script.rstrip().endswith("make test")
