"""FSDP2 training: 2 gloo ranks under torchrun give the single-process update.

The worker (``tests/support/scale_fsdp_worker.py``) runs one policy update on a fixed batch of
11 episodes of two tasks with a KL term to a bf16 reference, two mini-batches (the
second one off-policy, so clipping is live) and micro-batches capped at 48 tokens, so
the two ranks get unequal micro-batch counts. With SGD at lr 1 and no gradient
clipping the parameter change is exactly the accumulated gradient.

Tolerance: 1e-5 absolute on every gradient entry (largest entries ~0.1) and 1e-4
relative on the loss, KL and statistics; the difference is the order of float sums
(gradients reduced over ranks) and bf16 matmuls of the sharded reference.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agentgym_eppo.trainer.distributed.fsdp import rank_share  # noqa: E402

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
pytestmark = pytest.mark.train


def _run(args: list[str]) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)]),
        "OMP_NUM_THREADS": "1",
    }
    done = subprocess.run(
        [sys.executable, *args], cwd=TESTS, env=env, capture_output=True, text=True, timeout=400
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.mark.slow
def test_two_gloo_ranks_give_the_single_process_loss_and_gradients(tmp_path):
    single, sharded = tmp_path / "single.pt", tmp_path / "fsdp.pt"
    _run(["support/scale_fsdp_worker.py", str(single), "single"])
    _run([
        "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
        "support/scale_fsdp_worker.py", str(sharded), "fsdp",
    ])  # fmt: skip
    a, b = torch.load(single), torch.load(sharded)
    assert a["tokens"] == b["tokens"] == 87
    assert b["advantages"] == a["advantages"]
    for key in ("loss", "kl", "grad_norm"):
        assert b[key] == pytest.approx(a[key], rel=1e-4), key
    for key in ("task_entropy", "task_ratio_outside_share", "task_clipped_share"):
        assert b[key] == pytest.approx(a[key], rel=1e-4), key
    assert sum(a["task_clipped_share"].values()) > 0  # the off-policy mini-batch clipped tokens
    assert a["gradients"].keys() == b["gradients"].keys()
    for name, gradient in a["gradients"].items():
        assert gradient.abs().max() > 0, name
        torch.testing.assert_close(b["gradients"][name], gradient, atol=1e-5, rtol=0)


def test_rank_share_balances_tokens_and_covers_every_episode_once():
    lengths = [100, 10, 60, 50, 40, 30, 5]
    shares = [rank_share(lengths, rank, 3) for rank in range(3)]
    assert sorted(i for share in shares for i in share) == list(range(len(lengths)))
    assert shares == [[0], [1, 2, 5], [3, 4, 6]]
    assert [sum(lengths[i] for i in share) for share in shares] == [100, 100, 95]
    assert rank_share([7, 7], 1, 4) == [1] and rank_share([7, 7], 3, 4) == []


def test_exit_distributed_exits_with_its_code_and_skips_the_teardown():
    script = (
        "import atexit\n"
        "from agentgym_eppo.trainer.distributed.fsdp import exit_distributed\n"
        "atexit.register(lambda: print('teardown ran'))\n"
        "print('written', flush=True)\n"
        "exit_distributed(3)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout == "written\n"
