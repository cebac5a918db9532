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


@pytest.mark.skipif("avx2" not in describe_machine()["cpu_flags"], reason="the CPU has no AVX2")
def test_kernels_held_to_avx2_are_recorded_and_turn_bf16_auto_off():
    code = (
        "import json; from agentgym_eppo.trainer.devices import describe_machine, resolve_bf16; "
        "print(json.dumps([describe_machine(), resolve_bf16('auto')]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "ATEN_CPU_CAPABILITY": "avx2"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    machine, bf16 = json.loads(done.stdout)
    assert machine["kernels"] == "AVX2"
    assert machine["cpu_flags"] == describe_machine()["cpu_flags"]  # the CPU is the same
    assert bf16 is False


def test_an_explicit_bf16_setting_is_kept():
    assert resolve_bf16(True) is True and resolve_bf16(False) is False
