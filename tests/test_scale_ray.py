"""Ray orchestration on a local 2-CPU cluster: env worker actors, an HF rollout actor and
trainer ranks in a placement group, through whole training steps.

Every ``ray.get`` is bounded (``ray.get_timeout_s``); the cluster is started once for
the module (``ray.init(num_cpus=2)``, about 3 s) and shut down at its end.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
ray = pytest.importorskip("ray")

from support import trainer_test_envs  # noqa: E402, F401  (registers the test tasks)

from agentgym_eppo.trainer.algorithms.clip_policies import FixedClip  # noqa: E402
from agentgym_eppo.trainer.distributed.config import RayConfig, ScaleConfig  # noqa: E402
from agentgym_eppo.trainer.distributed.launch import (  # noqa: E402
    make_rollout_engine,
    make_vector_env,
)
from agentgym_eppo.trainer.distributed.ray_cluster import (  # noqa: E402
    RayCallTimeout,
    connect,
    gather_in_order,
    split_evenly,
)
from agentgym_eppo.trainer.distributed.ray_rollout import (  # noqa: E402
    PackedWeights,
    RayRolloutEngine,
)
from agentgym_eppo.trainer.rl_step import StepSettings, rl_step  # noqa: E402
from agentgym_eppo.trainer.rollout.episodes import RolloutLimits  # noqa: E402
from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine  # noqa: E402
from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer  # noqa: E402
from agentgym_eppo.trainer.training.update import PolicyUpdater, UpdateSettings  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.train]
TASKS = {"support.trainer_test_envs:Echo-v0": 2, "support.trainer_test_envs:Lookup-v0": 2}
SCALE = ScaleConfig(
    ray=RayConfig(
        address="local",
        num_cpus=2,
        env_worker_cpus=0.05,
        rollout_actor_cpus=0.5,
        trainer_ranks=2,
        trainer_rank_cpus=0.5,
        get_timeout_s=180,
    )
)


@pytest.fixture(scope="module")
def cluster():
    started = connect(SCALE.ray)
    assert started and ray.cluster_resources()["CPU"] == 2
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(
        ["Say apple. Call say with the word. The word is in box1. open say"] * 20, vocab_size=400
    )


def _all_cpus_free_within(seconds: float) -> bool:
    """Ray releases a killed actor's reservation asynchronously: poll, bounded."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ray.available_resources().get("CPU", 0.0) == pytest.approx(2.0):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_a_training_step_runs_env_actors_and_an_hf_rollout_actor(cluster, tokenizer, tmp_path):
    torch.set_num_threads(1)
    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1, seed=0)
    venv = make_vector_env(SCALE, TASKS, group_size=2, env_kwargs={}, seed=0)
    engine = make_rollout_engine(SCALE, model, tokenizer, tmp_path)
    try:
        assert isinstance(engine, RayRolloutEngine) and len(engine.actors) == 1
        assert venv.backend == "ray"
        used = ray.cluster_resources()["CPU"] - ray.available_resources().get("CPU", 0.0)
        assert used == pytest.approx(4 * 0.05 + 0.5)  # 4 env actors + 1 rollout actor
        updater = PolicyUpdater(
            model,
            torch.optim.AdamW(model.parameters(), lr=5e-2),
            FixedClip(),
            UpdateSettings(kl_coef=0.0, temperature=1.0),
            pad_token_id=tokenizer.pad_token_id,
        )
        limits = RolloutLimits(max_tokens_per_turn=12, max_context=400, temperature=1.0)
        settings = StepSettings(seed=3, limits=limits, prompt_style="compact", group_size=2)
        first = rl_step(1, venv, engine, updater, tokenizer, settings)
        episodes, result = first.played, first.result
        assert sorted(e.task_id for e in episodes) == ["echo", "echo", "lookup", "lookup"]
        assert all(e.status != "running" and e.turns >= 1 for e in episodes)
        assert result.tokens == sum(e.generated_tokens for e in episodes) > 0
        assert result.task_tokens.keys() == {"echo", "lookup"}
        assert engine.last_sync.syncs == 1
        assert engine.last_sync.bytes == sum(
            t.numel() * t.element_size() for t in model.state_dict().values()
        )
        # the actor now samples from the updated policy: greedy turns equal in-process ones
        local = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id)
        contexts = [e.transcript.tokens[:20] for e in episodes]
        assert engine.generate(contexts, [6] * 4, 0.0) == local.generate(contexts, [6] * 4, 0.0)
        second = rl_step(2, venv, engine, updater, tokenizer, settings).result
        assert engine.last_sync.syncs == 2 and second.tokens > 0
    finally:
        engine.close()
        venv.close()


def test_an_actor_that_cannot_be_placed_is_a_bounded_timeout(cluster, tokenizer):
    model = build_tiny_model(tokenizer, hidden_size=16, layers=1, heads=2, kv_heads=1, seed=0)
    with pytest.raises(RayCallTimeout, match=r"rollout actors \(start\) did not answer within 2s"):
        RayRolloutEngine(model, 1, 0, actor_options={"num_cpus": 3}, timeout_s=2)
    assert _all_cpus_free_within(10.0)  # the pending actor was killed, nothing is held


@pytest.mark.slow
def test_trainer_ranks_in_a_placement_group_match_the_single_process_update(cluster, tmp_path):
    from support import scale_fsdp_worker

    from agentgym_eppo.trainer.distributed.ray_trainer import place_from_config

    single, sharded = tmp_path / "single.pt", tmp_path / "ranks.pt"
    scale_fsdp_worker.main(str(single), "single")
    ranks = place_from_config(SCALE.ray)  # 2 ranks of 0.5 CPU in a PACK placement group
    assert len(ranks.actors) == 2
    try:
        assert ranks.run(scale_fsdp_worker.main, str(sharded), "fsdp") == [None, None]
    finally:
        ranks.close()
    a, b = torch.load(single), torch.load(sharded)
    assert b["loss"] == pytest.approx(a["loss"], rel=1e-4)
    for name, gradient in a["gradients"].items():
        torch.testing.assert_close(b["gradients"][name], gradient, atol=1e-5, rtol=0)


def test_packed_weights_round_trip_every_dtype_and_layout(cluster):
    state = {
        "w": torch.arange(12, dtype=torch.float32).reshape(3, 4).t(),  # not contiguous
        "h": torch.tensor([1.5, -2.25], dtype=torch.bfloat16),
        "n": torch.tensor([7], dtype=torch.int64),
        "e": torch.zeros(0),
    }
    packed = PackedWeights.pack(state)
    assert packed.payload_bytes == 12 * 4 + 2 * 2 + 8
    assert [entry[3] for entry in packed.layout] == [0, 64, 128, 192]  # aligned starts
    stored = ray.get(ray.put(packed), timeout=30)  # comes back as a read-only view
    assert not stored.buffer.flags.writeable
    for name, tensor in stored.unpack().items():
        assert tensor.dtype == state[name].dtype and torch.equal(tensor, state[name]), name


def test_split_and_gather_keep_the_order():
    pieces = split_evenly(7, 3)
    assert [list(p) for p in pieces] == [[0, 1, 2], [3, 4], [5, 6]]
    assert gather_in_order(pieces, [["a", "b", "c"], ["d", "e"], ["f", "g"]]) == list("abcdefg")
    assert [len(p) for p in split_evenly(2, 4)] == [1, 1, 0, 0]
    with pytest.raises(ValueError, match="a piece of 2 came back with 1 answers"):
        gather_in_order(split_evenly(2, 1), [["x"]])


@pytest.mark.slow
def test_a_second_driver_joins_the_running_cluster_by_address(cluster):
    address = ray.get_runtime_context().gcs_address
    script = (
        "import ray\n"
        "from agentgym_eppo.trainer.distributed.config import RayConfig\n"
        "from agentgym_eppo.trainer.distributed.ray_cluster import connect\n"
        f"started = connect(RayConfig(address={address!r}))\n"
        "print(started, ray.cluster_resources()['CPU'], ray.get_runtime_context().gcs_address)\n"
        "ray.shutdown()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=os.environ
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "2.0", address]


def test_single_process_config_has_nothing_to_join():
    with pytest.raises(ValueError, match="single-process"):
        connect(RayConfig())
