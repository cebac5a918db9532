"""One measurement in a fresh process, so that it has its own peak RSS and no state of
the others (imports, caches, thread pools)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def in_subprocess(module: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """Run ``python -m MODULE --one SPEC_JSON`` from the repository root and return the
    JSON object on the last line of its stdout; raise with its stderr's tail if it fails."""
    env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [sys.executable, "-m", module, "--one", json.dumps(dict(spec))],
        capture_output=True, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{dict(spec)} failed:\n{done.stderr[-3000:]}")
    print(f"  {dict(spec)}: done", flush=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))
