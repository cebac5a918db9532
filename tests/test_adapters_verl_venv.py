"""The verl adapter's tests, run in the verl venv from the main test run.

verl 0.9.1 pins transformers<5.11 while the main venv holds a newer one, so ``make
test`` builds ``.venv-verl`` (torch 2.13.0, verl 0.9.1 with its pins, this project)
and this test runs ``tests/support/verl_adapter_checks.py`` there with pytest. It fails if any
of them fails or skips, and the main run's summary counts them under verl.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import REPO_ROOT, record_library_run

VERL_VENV = Path(os.environ.get("VERL_VENV", REPO_ROOT / ".venv-verl"))
CHECKS = "tests/support/verl_adapter_checks.py"


@pytest.mark.slow
def test_the_verl_adapter_tests_pass_in_the_verl_venv(request: pytest.FixtureRequest) -> None:
    python = VERL_VENV / "bin" / "python"
    if not python.exists():
        pytest.skip(f"the verl venv is not built at {VERL_VENV}: `make test` builds it")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["CI"] = "true"  # inside, any skip fails the run as well
    result = subprocess.run(
        [str(python), "-m", "pytest", CHECKS, "-q", "-p", "no:cacheprovider"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    tail = result.stdout[-4000:] + result.stderr[-2000:]
    ran = re.search(r"^verl (\S+) in (\S+): (.+)$", result.stdout, re.MULTILINE)
    if ran:
        version, venv, counts = ran.groups()
        outcomes = {o: int(n) for n, o in re.findall(r"(\d+) (\w+)", counts)}
        record_library_run(request.config, "verl", version, venv, outcomes)
    assert result.returncode == 0, tail
    assert ran is not None, tail
    assert re.search(r"^\d+ passed", result.stdout.splitlines()[-1]), tail
    assert "skipped" not in result.stdout.splitlines()[-1], tail
