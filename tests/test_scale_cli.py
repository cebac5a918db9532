"""``agentgym-eppo train`` with the scale sections: Ray (``ray.address``) and an SGLang
server (``engine.kind=sglang-server``) reach the real training loop."""

from __future__ import annotations

import copy
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from support import trainer_test_envs  # noqa: E402, F401  (registers the test tasks)

from agentgym_eppo.trainer.cli import main as cli_main  # noqa: E402
from agentgym_eppo.trainer.config import load_config  # noqa: E402

pytestmark = pytest.mark.train
TASKS = "{support.trainer_test_envs:Echo-v0: 2, support.trainer_test_envs:Lookup-v0: 2}"


def _args(tmp_path, *extra):
    return [
        f"output_dir={tmp_path}",
        f"tasks={TASKS}",
        "rollout.group_size=2",
        "rollout.backend=serial",
        "rollout.max_tokens_per_turn=16",
        "rollout.max_context=400",
        "rollout.prompt=compact",
        "model.vocab_size=400",
        "model.hidden_size=32",
        "model.layers=1",
        "model.heads=2",
        "model.kv_heads=1",
        "sft.episodes_per_task=2",
        "sft.epochs=1",
        "rl.steps=2",
        "rl.save_every=2",
        "eval.stages=[]",
        "progress=false",
        "tensorboard=false",
        "bf16=false",
        "threads=1",
        *extra,
    ]


def _steps(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_scale_keys_are_config_keys_and_bad_values_are_refused():
    config = load_config(None, ["ray.address=auto", "engine.kind=sglang-server"])
    assert (config.ray.address, config.engine.kind, config.engine.top_p) == (
        "auto",
        "sglang-server",
        1.0,
    )
    with pytest.raises(ValueError, match=r"engine.kind must be one of"):
        load_config(None, ["engine.kind=vllm"])
    with pytest.raises(ValueError, match=r"unknown config key ray.adress"):
        load_config(None, ["ray.adress=auto"])


@pytest.mark.slow
@pytest.mark.ray
def test_train_with_ray_address_runs_rl_steps_on_a_ray_cluster(tmp_path):
    ray = pytest.importorskip("ray")
    args = _args(tmp_path, "ray.address=local", "ray.num_cpus=2", "ray.rollout_actor_cpus=0.5")
    assert cli_main(["train", "--defaults", *args]) == 0
    steps = _steps(tmp_path)
    assert [s["step"] for s in steps] == [1, 2]
    assert all(s["global"]["tokens"] > 0 for s in steps)
    assert "address: local" in (tmp_path / "config.yaml").read_text()
    assert not ray.is_initialized()  # the run started the runtime and stopped it


@pytest.mark.slow
def test_train_with_an_sglang_server_engine_syncs_weights_every_step(tmp_path):
    from support.sglang_loopback import LoopbackSGLang

    from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer

    tokenizer = build_tokenizer(["placeholder"] * 5, vocab_size=300)
    stand_in = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1)
    # The server starts on some other model; the trainer's first sync replaces it.
    with LoopbackSGLang(copy.deepcopy(stand_in), 0, 0) as server:
        args = _args(tmp_path, "engine.kind=sglang-server", f"engine.url={server.url}")
        assert cli_main(["train", "--defaults", *args]) == 0
        loads = [
            p["model_path"] for path, p in server.requests if path == "/update_weights_from_disk"
        ]
        generated = [p for path, p in server.requests if path == "/generate"]
    assert len(loads) == 3  # the starting weights, then after each of the 2 steps
    assert loads[-1].endswith("engine_weights/fresh/sync-3")
    assert generated and server.flushes == 3
    assert [s["step"] for s in _steps(tmp_path)] == [1, 2]
