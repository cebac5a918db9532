"""`agentgym-eppo pretrain`: data from fresh instances, a loadable model, exact resume."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from agentgym_eppo.environments.fresh import heldout_hashes
from agentgym_eppo.trainer.training.pretrain import (
    PretrainConfig,
    Shard,
    hasty_answers,
    load_episodes,
    load_pretrain_config,
    plan_shards,
    plan_steps,
    play_shard,
)

pytestmark = pytest.mark.train
CLI = [
    sys.executable,
    "-c",
    "import sys; from agentgym_eppo.trainer.cli import main; sys.exit(main())",
]


def tiny_config(out: Path, episodes: dict, steps: int = 6, **data: object) -> Path:
    config = {
        "output_dir": str(out),
        "threads": 1,
        "progress": False,
        "data": {"episodes": episodes, "shard_size": 4, "workers": 2, **data},
        "model": {
            "vocab_size": 700, "tokenizer_episodes": 50, "hidden_size": 32, "layers": 2,
            "heads": 2, "kv_heads": 1, "intermediate_size": 64, "max_position_embeddings": 4096,
        },
        "train": {
            "steps": steps, "batch_tokens": 4096, "micro_batch_tokens": 4096,
            "max_length": 4096, "lr": 3e-3, "save_every": 2, "snapshots": [2],
        },
    }  # fmt: skip
    path = out.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def test_pretrain_cli_writes_a_model_any_hf_tool_loads(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = tiny_config(
        tmp_path / "run",
        {"os": 6, "db": 8, "kg": 8, "webshop": 4, "alfworld": 2},
        source={"alfworld": "train"},
        env_kwargs={"os": {"command_timeout": 5}, "alfworld": {"max_turns": 30}},
    )
    done = subprocess.run(
        [*CLI, "pretrain", "--config", str(config)], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # stdout is no terminal here: a line at each checkpoint (save_every 2), as it happens
    assert [line.split(":")[0] for line in done.stdout.splitlines() if "pretrain step" in line] == [
        "pretrain step 2/6",
        "pretrain step 4/6",
        "pretrain step 6/6",
    ]
    model_dir = tmp_path / "run" / "model"
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    assert model.config.model_type == "qwen2"
    assert "<tool_call>" in tokenizer.get_vocab() and tokenizer.chat_template
    summary = json.loads((model_dir / "pretrain.json").read_text())
    assert summary["episodes"] == {"os": 6, "db": 8, "kg": 8, "webshop": 4, "alfworld": 2}
    assert summary["steps"] == 6 and summary["prompt"] == "compact"
    assert summary["device"] == ("cuda" if torch.cuda.is_available() else "cpu")  # auto
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6]
    assert records[-1]["loss"] < records[0]["loss"]
    assert (tmp_path / "run" / "snapshots" / "step_2" / "model.safetensors").exists()
    # Every fresh episode is new: none is a dev or test instance.
    episodes = [
        json.loads(line)
        for shard in sorted((tmp_path / "run" / "data").glob("*.jsonl.gz"))
        for line in __import__("gzip").open(shard, "rt")
    ]
    for row in episodes:
        if row["task_id"] != "alfworld":
            assert row["content_hash"] not in heldout_hashes(row["task_id"])
            assert row["success"] is True


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run / "model" / "model.safetensors"))


def test_a_run_killed_mid_training_resumes_to_the_same_weights(tmp_path: Path) -> None:
    episodes = {"db": 24, "kg": 24}
    whole = tiny_config(tmp_path / "whole", episodes, steps=16)
    subprocess.run(
        [*CLI, "pretrain", "--config", str(whole)], check=True, timeout=900, capture_output=True
    )

    killed_config = tiny_config(tmp_path / "killed", episodes, steps=16)
    shutil.copytree(tmp_path / "whole" / "data", tmp_path / "killed" / "data")  # the same shards
    latest = tmp_path / "killed" / "checkpoints" / "latest"
    kills = 0
    for _ in range(3):
        process = subprocess.Popen([*CLI, "pretrain", "--config", str(killed_config)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        before = latest.read_text() if latest.exists() else ""
        deadline = time.monotonic() + 300
        while process.poll() is None and time.monotonic() < deadline:
            if latest.exists() and latest.read_text() != before:
                os.kill(process.pid, signal.SIGKILL)
                kills += 1
                break
            time.sleep(0.01)
        process.wait()
    final = subprocess.run([*CLI, "pretrain", "--config", str(killed_config)], timeout=900,
                           capture_output=True, text=True)  # fmt: skip
    assert final.returncode == 0, final.stderr[-2000:]
    steps = int(latest.read_text().strip().split("_")[1])
    assert kills >= 1 and steps == 16
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "killed")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_continued_run_starts_from_the_models_weights_and_tokenizer(tmp_path: Path) -> None:
    """init_from: the first step's loss is the trained model's (not a fresh model's), the
    tokenizer is the model's own, and the summary adds the tokens the model had seen."""
    first = tiny_config(tmp_path / "first", {"db": 16}, steps=12)
    subprocess.run(
        [*CLI, "pretrain", "--config", str(first)], check=True, timeout=900, capture_output=True
    )
    config = yaml.safe_load(tiny_config(tmp_path / "next", {"db": 16}, steps=2, seed=7).read_text())
    config["init_from"] = str(tmp_path / "first" / "model")
    config["model"] = {"vocab_size": 300, "hidden_size": 16}  # not used: the model is loaded
    path = tmp_path / "next.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    done = subprocess.run(
        [*CLI, "pretrain", "--config", str(path)], capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "continuing the pretraining of" in done.stdout
    losses = {
        run: [json.loads(line)["loss"] for line in (tmp_path / run / "metrics.jsonl").open()]
        for run in ("first", "next")
    }
    start, end, resumed = losses["first"][0], losses["first"][-1], losses["next"][0]
    assert end < start - 0.3  # the first run learned something
    assert abs(resumed - end) < abs(resumed - start), losses  # and the next run starts there
    from transformers import AutoTokenizer

    old, new = (
        AutoTokenizer.from_pretrained(tmp_path / run / "model") for run in ("first", "next")
    )
    assert new.get_vocab() == old.get_vocab() and new.chat_template == old.chat_template
    before = json.loads((tmp_path / "first" / "model" / "pretrain.json").read_text())
    after = json.loads((tmp_path / "next" / "model" / "pretrain.json").read_text())
    assert after["tokens_seen_total"] == before["tokens_seen"] + after["tokens_seen"]
    assert after["init_from"] == config["init_from"]


def test_load_episodes_keeps_an_instance_drawn_twice_once(tmp_path: Path) -> None:
    import gzip

    row = {"task_id": "db", "sample_id": "x", "system_prompt": "", "tools": [], "task_text": "t",
           "actions": ["a"], "observations": ["o"], "reward": 1.0, "success": True,
           "content_hash": "h"}  # fmt: skip
    for name in ("a", "b"):
        with gzip.open(tmp_path / f"{name}.jsonl.gz", "wt") as handle:
            handle.write(json.dumps(row) + "\n")
    assert len(load_episodes([tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"])) == 1


def test_the_step_plan_covers_every_episode_each_epoch_in_a_seeded_order() -> None:
    lengths = [100] * 10
    plan = plan_steps(lengths, steps=5, batch_tokens=400, seed=3)
    assert [len(b) for b in plan] == [4, 4, 4, 4, 4]
    assert sorted(plan[0] + plan[1] + plan[2][:2]) == list(range(10))
    assert plan == plan_steps(lengths, steps=5, batch_tokens=400, seed=3)
    assert plan != plan_steps(lengths, steps=5, batch_tokens=400, seed=4)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data.episodes={osx: 3}", "data.episodes must name task families"),
        ("data.source={os: web}", r"data.source.os: 'web'"),
        ("data.repeat={os: 0}", r"data.repeat.os: 0 must be >= 1"),
        ("data.hasty={os: 1.0}", r"data.hasty.os: 1.0 must be in \[0, 1\)"),
        ("data.hasty={db: 0.2}", r"data.hasty.db: 0.2 must be in \[0, 1\) for a task of"),
        ("data.hasty={webshop: 0.2}", "with a hasty answer"),
        ("train.micro_batch_tokens=1024", "train.max_length <= train.micro_batch_tokens"),
        ("prompt=short", "prompt must be one of"),
        ("bf16=maybe", "bf16 must be auto, true or false"),
        ("device=gpu", "device must be auto or a torch device"),
        ("train.bogus=1", "unknown config key train.bogus"),
    ],
)
def test_a_bad_config_fails_when_it_is_loaded(override: str, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        load_pretrain_config(None, ["data.episodes={os: 3}", override])


def test_shards_cover_each_tasks_episodes_once_in_order() -> None:
    config = load_pretrain_config(
        None, ["data.episodes={alfworld: 10, db: 3}", "data.shard_size=4"]
    )
    shards = plan_shards(config.data)
    alfworld = [(s.first, s.count) for s in shards if s.task_id == "alfworld"]
    assert alfworld == [(0, 4), (4, 4), (8, 2)]  # the short last shard starts after the others
    assert [s.task_id for s in shards] == ["alfworld", "db", "alfworld", "alfworld"]


@pytest.mark.parametrize("task_id", sorted(hasty_answers()))
def test_the_hasty_demonstrator_answers_blind_and_fails_on_its_share_of_instances(
    task_id: str,
) -> None:
    """``data.hasty``: a seeded draw gives the hasty demonstrator its share of a shard's
    instances; each of its episodes is its task's answer call at the first turn, ends
    there unsolved, and is kept (the expert's are kept only when solved)."""
    kwargs = {"command_timeout": 5} if task_id == "os" else {}
    shard = Shard(task_id, 0, 12, 0, "fresh", 4_000, kwargs, hasty=0.5)
    rows = play_shard(shard)
    hasty = [r for r in rows if r["demonstrator"] == "hasty"]
    expert = [r for r in rows if r["demonstrator"] == "expert"]
    assert 2 <= len(hasty) <= 10 and len(hasty) + len(expert) == 12  # the expert solves all
    for row in hasty:
        assert len(row["actions"]) == 1 and hasty_answers()[task_id]["name"] in row["actions"][0]
        assert not row["success"] and row["reward"] <= 0
    assert all(r["success"] and len(r["actions"]) >= 2 for r in expert)
    assert [r["sample_id"] for r in rows] == [r["sample_id"] for r in play_shard(shard)]
    episodes = load_episodes_of(rows)
    assert sum(e.demonstrator == "hasty" for e in episodes) == len(hasty)


def load_episodes_of(rows: list[dict]) -> list:
    import gzip
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "shard.jsonl.gz"
        with gzip.open(path, "wt") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in rows)
        return load_episodes([path])


def test_a_config_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- os\n- db\n", encoding="utf-8")
    with pytest.raises(ValueError, match="a config is a YAML mapping, got list"):
        load_pretrain_config(path)


@pytest.mark.parametrize(
    "name",
    ["tiny-base.yaml", "tiny-base-continued.yaml", "tiny-base-run3.yaml", "tiny-base-run4.yaml"],
)
def test_the_shipped_configs_are_valid(name: str) -> None:
    config = load_pretrain_config(Path(__file__).parents[1] / "configs" / name)
    assert isinstance(config, PretrainConfig)
    assert set(config.data.episodes) == {"os", "db", "kg", "alfworld", "webshop"}


def test_a_bf16_step_computes_the_fp32_steps_loss_and_gradients_closely() -> None:
    """bf16 autocast (fp32 master weights): the same loss within bf16's precision, and
    the weights' gradients stay fp32 and point the same way."""
    import torch

    from agentgym_eppo.trainer.rollout.chat import Transcript
    from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer
    from agentgym_eppo.trainer.training.pretrain import step_loss

    tokenizer = build_tokenizer(["ls -la /root", "echo hello world"] * 20, vocab_size=300)
    generator = torch.Generator().manual_seed(0)
    transcripts = []
    for length in (40, 64, 23):
        ids = torch.randint(3, len(tokenizer), (length,), generator=generator).tolist()
        transcript = Transcript(ids[:10])
        transcript.add_generated(ids[10:])
        transcripts.append(transcript)
    gradients, losses = [], []
    for bf16 in (False, True):
        model = build_tiny_model(tokenizer, hidden_size=64, layers=2, heads=4, kv_heads=2)
        loss, _, targets = step_loss(
            model, transcripts, [0, 1, 2], 256, tokenizer.pad_token_id, bf16
        )
        weight = model.model.layers[0].mlp.up_proj.weight
        assert weight.dtype == weight.grad.dtype == torch.float32
        gradients.append(weight.grad.flatten())
        losses.append(loss)
    assert targets == 30 + 54 + 13
    assert abs(losses[1] - losses[0]) < 0.02 * losses[0]
    assert torch.nn.functional.cosine_similarity(gradients[0], gradients[1], dim=0) > 0.95
