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


HELD_TO_AVX2 = pytest.mark.skipif(
    "avx2" not in describe_machine()["cpu_flags"], reason="the CPU has no AVX2"
)


def _held_to_avx2(code: str):
    """``code``'s printed JSON, run in a process whose torch kernels are held to AVX2 (where
    bf16 is emulated, so ``auto`` must give fp32 on this CPU)."""
    done = subprocess.run(
        [sys.executable, "-c", "import json, torch\n" + code],
        env={**os.environ, "ATEN_CPU_CAPABILITY": "avx2"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


@HELD_TO_AVX2
def test_kernels_held_to_avx2_are_recorded_and_turn_bf16_auto_off():
    machine, bf16 = _held_to_avx2(
        "from agentgym_eppo.trainer.devices import describe_machine, resolve_bf16\n"
        "print(json.dumps([describe_machine(), resolve_bf16('auto', torch.device('cpu'))]))"
    )
    assert machine["kernels"] == "AVX2"
    assert machine["cpu_flags"] == describe_machine()["cpu_flags"]  # the CPU is the same
    assert bf16 is False


def test_an_explicit_bf16_setting_is_kept():
    cpu = torch.device("cpu")
    assert resolve_bf16(True, cpu) is True and resolve_bf16(False, cpu) is False


@HELD_TO_AVX2
def test_bf16_auto_follows_the_models_device_not_the_machines_gpu():
    """A model kept on the CPU is judged by its CPU even where a GPU is visible (a GPU is
    faked in the child: none can be added here); it used to follow
    ``torch.cuda.is_available()`` and turn emulated bf16 on."""
    on_cpu, on_cuda = _held_to_avx2(
        "torch.cuda.is_available = lambda: True\n"
        "torch.cuda.get_device_name = lambda index=0: 'a GPU'\n"
        "from agentgym_eppo.trainer.devices import resolve_bf16\n"
        "print(json.dumps([resolve_bf16('auto', torch.device(d)) for d in ('cpu', 'cuda')]))"
    )
    assert on_cpu is False and on_cuda is True


def test_autocast_acts_on_the_models_device():
    """bf16 autocast on a CPU model's ops (it used to be CUDA autocast wherever a GPU was
    visible, leaving them in fp32)."""
    from agentgym_eppo.trainer.devices import autocast_context

    cpu = torch.device("cpu")
    with autocast_context(True, cpu):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    with autocast_context(False, cpu):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
