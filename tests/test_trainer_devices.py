"""What a run records about its machine, and the bf16 choice made from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from agentgym_eppo.trainer.devices import describe_machine, resolve_bf16  # noqa: E402

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="bf16 auto is on for GPUs")


def _in_a_process_with_kernels_held_to_avx2(code: str) -> object:
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2"}
    done = subprocess.run(
        [sys.executable, "-c", f"import json; {code}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


@pytest.mark.skipif("avx2" not in describe_machine()["cpu_flags"], reason="the CPU has no AVX2")
def test_kernels_held_to_avx2_are_recorded_and_turn_bf16_auto_off():
    machine = _in_a_process_with_kernels_held_to_avx2(
        "from agentgym_eppo.trainer.devices import describe_machine as d; print(json.dumps(d()))"
    )
    assert machine["kernels"] == "AVX2"
    assert machine["cpu_flags"] == describe_machine()["cpu_flags"]  # the CPU is the same
    bf16 = _in_a_process_with_kernels_held_to_avx2(
        "from agentgym_eppo.trainer.devices import resolve_bf16; "
        "print(json.dumps(resolve_bf16('auto')))"
    )
    assert bf16 is False


def test_an_explicit_bf16_setting_is_kept():
    assert resolve_bf16(True) is True and resolve_bf16(False) is False
