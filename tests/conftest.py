"""Shared test fixtures: where AgentBench's own task files are, and which services are up."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
