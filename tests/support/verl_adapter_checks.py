"""The verl adapter against verl 0.9.1 itself: run in the verl venv (``.venv-verl``).

verl pins transformers<5.11, so it lives in a venv of its own that ``make test`` builds;
``tests/test_adapters_verl_venv.py`` runs this file there (the name keeps the main
venv's pytest from collecting it). What is real: verl's ``AgentLoopWorker`` (its agent
loop registry, hydra instantiation, Continuous Token builder, padding, reward
placement and batch assembly), its ``ToolAgentLoop`` with its hermes tool parser, its
``BaseTool``/``ToolResponse`` types and its generated trainer config, with the
agentgym-tiny tokenizer and chat template. What is not: the LLM server. No vLLM or
SGLang runs here, so a :class:`ScriptedServer` (verl's ``LLMServerClient`` with
``generate`` answered locally) replies with fixed text per sample and turn, tokenized
by the real tokenizer.

EPPO's trainer (:class:`~agentgym_eppo.adapters.verl_eppo.EPPORayPPOTrainer`) runs one
step of ``fit``'s order on those episodes with verl's own actor worker
(``ActorRolloutRefWorker``: its FSDP2 engine, micro-batching, loss call, metric
aggregation and checkpoints) training agentgym-tiny on the CPU, in this process: a
:class:`PlatformCPU` stands in for verl's GPU platform, and the worker itself for the
Ray worker group that would call it on one rank.
"""

from __future__ import annotations

import asyncio
import doctest
import json
import math
import re
import socket
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from omegaconf import DictConfig, OmegaConf
from tensordict import TensorDict
from transformers import AutoTokenizer
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker, _agent_loop_registry
from verl.plugin.platform import platform_manager
from verl.plugin.platform.platform_cuda import PlatformCUDA
from verl.protocol import DataProto
from verl.single_controller.ray import ResourcePoolManager
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
from verl.trainer.ppo.core_algos import get_policy_loss_fn
from verl.trainer.ppo.ray_trainer import compute_response_mask
from verl.trainer.ppo.utils import Role
from verl.utils import tensordict_utils
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.dataset.rl_dataset import collate_fn as rl_collate_fn
from verl.utils.metric import reduce_metrics
from verl.workers.engine_workers import ActorRolloutRefWorker
from verl.workers.rollout.llm_server import LLMServerClient
from verl.workers.rollout.replica import TokenOutput
from verl.workers.utils.losses import ppo_loss

from agentgym_eppo.adapters import verl as verl_adapter
from agentgym_eppo.adapters import verl_eppo
from agentgym_eppo.trainer.algorithms.losses import clipped_policy_loss
from agentgym_eppo.trainer.algorithms.pacer import EPPOPacer
from agentgym_eppo.trainer.training.models import resolve_model_path
from support.vector_test_envs import COUNT, GUESS

pytestmark = pytest.mark.real_library("verl")

TINY = resolve_model_path("agentgym-tiny")
END = "<|im_end|>"


def call(word: str) -> str:
    return f'<tool_call>\n{{"name": "say", "arguments": {{"word": "{word}"}}}}\n</tool_call>'


class ScriptedServer(LLMServerClient):
    """verl's LLM server client with ``generate`` answered here, in place of vLLM/SGLang:
    the reply for a sample's k-th turn is ``replies[sample_id][k]`` (the sample found in
    the prompt's text, the turn by the tool responses seen so far), tokenized for real."""

    def __init__(self, config: DictConfig, tokenizer: Any, replies: dict[str, list[str]]) -> None:
        super().__init__(config)
        self.tokenizer = tokenizer
        self.replies = replies
        self.calls = 0

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> TokenOutput:
        self.calls += 1
        text = self.tokenizer.decode(prompt_ids)
        (sample,) = [name for name in self.replies if f"of {name}." in text]
        reply = self.replies[sample][text.count("<tool_response>")] + END
        return TokenOutput(token_ids=self.tokenizer(reply, add_special_tokens=False)["input_ids"])


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return AutoTokenizer.from_pretrained(TINY)


def trainer_config(tmp_path: Path, response_length: int = 128) -> DictConfig:
    """verl's own generated PPO trainer config, pointed at agentgym-tiny and our loops."""
    config = OmegaConf.load(str(files("verl.trainer.config") / "_generated_ppo_trainer.yaml"))
    config.actor_rollout_ref.model.path = TINY
    rollout = config.actor_rollout_ref.rollout
    rollout.name = "vllm"  # mandatory in the config; only the real server client reads it
    rollout.prompt_length, rollout.response_length = 512, response_length
    loops = tmp_path / "agent_loops.yaml"
    verl_adapter.write_verl_agent_loop_config(str(loops))
    rollout.agent.agent_loop_config_path = str(loops)
    tools = tmp_path / "tools.yaml"
    verl_adapter.write_verl_tool_config(str(tools), [GUESS])
    rollout.multi_turn.tool_config_path = str(tools)
    return config


def batch_of(rows: list[dict[str, Any]]) -> DataProto:
    """The fields verl's RLHFDataset gives each sample (``tools_kwargs`` from extra_info)."""
    column = lambda values: np.array(values, dtype=object)  # noqa: E731
    return DataProto.from_single_dict(
        {
            "raw_prompt": column([row["prompt"] for row in rows]),
            "extra_info": column([row["extra_info"] for row in rows]),
            "tools_kwargs": column([row["extra_info"]["tools_kwargs"] for row in rows]),
            "agent_name": column([row["agent_name"] for row in rows]),
        }
    )


def generate(config: DictConfig, server: ScriptedServer, rows: list[dict[str, Any]]) -> DataProto:
    worker = AgentLoopWorker(config, llm_client=server)
    return asyncio.run(worker.generate_sequences(batch_of(rows)))


def split_response(output: DataProto, i: int, tokenizer: Any) -> tuple[str, str]:
    """(the model's tokens, the environment's tokens) of sample ``i``'s response."""
    response = output.batch["responses"][i]
    mask = output.batch["response_mask"][i].bool()
    used = output.batch["attention_mask"][i, -response.shape[0] :].bool()
    return tokenizer.decode(response[mask]), tokenizer.decode(response[used & ~mask])


# ---------------------------------------------------------------------- the agent loop


def test_agent_loop_is_registered_under_its_name() -> None:
    assert verl_adapter.AGENT_LOOP_NAME == "agentgym_agent"
    assert _agent_loop_registry["agentgym_agent"] == {
        "_target_": "agentgym_eppo.adapters.verl.AgentGymAgentLoop"
    }


def test_verls_agent_loop_worker_plays_episodes_through_the_agent_loop(
    tmp_path: Path, tokenizer: Any
) -> None:
    rows = verl_adapter.verl_rows(GUESS, [2, 0], agent_name="agentgym_agent")
    server = ScriptedServer(
        trainer_config(tmp_path),
        tokenizer,
        {"guess-train-2": [call("alpha"), call("gamma")], "guess-train-0": [call("beta")] * 4},
    )
    output = generate(trainer_config(tmp_path), server, rows)

    assert list(output.non_tensor_batch["agentgym_task"]) == ["guess", "guess"]
    assert list(output.non_tensor_batch["agentgym_status"]) == ["completed", "task_limit_reached"]
    assert list(output.non_tensor_batch["agentgym_success"]) == [True, False]
    assert [list(t) for t in output.non_tensor_batch["turn_scores"]] == [
        [0.0, 1.0],
        [0.0] * 3 + [-0.2],
    ]
    assert list(output.non_tensor_batch["__num_turns__"]) == [5, 9]
    # verl places each episode's return on its last response token
    scores = output.batch["rm_scores"]
    last = output.batch["attention_mask"][:, -scores.shape[1] :].sum(dim=1) - 1
    assert scores.sum(dim=1).tolist() == pytest.approx([1.0, -0.2])
    assert scores[[0, 1], last].tolist() == pytest.approx([1.0, -0.2])

    model, environment = split_response(output, 0, tokenizer)
    assert model == call("alpha") + END + call("gamma") + END
    assert environment == (
        "\n<|im_start|>user\n<tool_response>\nnot alpha\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    prompt = tokenizer.decode(output.batch["prompts"][0][output.batch["prompts"][0] != 0])
    assert "Guess the word of guess-train-2." in prompt and '"name": "say"' in prompt


def test_agent_loop_ends_an_episode_that_outgrows_the_response_budget(
    tmp_path: Path, tokenizer: Any
) -> None:
    config = trainer_config(tmp_path, response_length=48)
    rows = verl_adapter.verl_rows(GUESS, [0], agent_name="agentgym_agent")
    server = ScriptedServer(config, tokenizer, {"guess-train-0": [call("beta")] * 4})
    output = generate(config, server, rows)
    assert list(output.non_tensor_batch["agentgym_status"]) == ["agent_context_limit"]
    assert output.batch["rm_scores"].sum().item() == pytest.approx(-0.2)
    assert output.batch["responses"].shape[1] == 48
    assert server.calls < 4


def test_agent_loop_needs_the_task_in_extra_info(tmp_path: Path, tokenizer: Any) -> None:
    (row,) = verl_adapter.verl_rows(GUESS, [0], agent_name="agentgym_agent")
    del row["extra_info"]["task"]
    server = ScriptedServer(trainer_config(tmp_path), tokenizer, {})
    with pytest.raises(ValueError, match=r"needs extra_info\['task'\]"):
        generate(trainer_config(tmp_path), server, [row])


# ---------------------------------------------------------------------- the BaseTool route


def test_verls_tool_agent_loop_runs_our_tools_on_one_episode(
    tmp_path: Path, tokenizer: Any
) -> None:
    rows = verl_adapter.verl_rows(GUESS, [2])
    assert rows[0]["agent_name"] == "tool_agent"
    server = ScriptedServer(
        trainer_config(tmp_path), tokenizer, {"guess-train-2": [call("alpha"), call("gamma"), "ok"]}
    )
    returns_before = dict(verl_adapter.SESSIONS.returns)
    output = generate(trainer_config(tmp_path), server, rows)
    assert [list(t) for t in output.non_tensor_batch["tool_rewards"]] == [[0.0, 1.0]]
    _, environment = split_response(output, 0, tokenizer)
    assert re.findall(r"<tool_response>\n(.*?)\n</tool_response>", environment) == [
        "not alpha",
        "right",
    ]
    ended = {k: v for k, v in verl_adapter.SESSIONS.returns.items() if k not in returns_before}
    assert list(ended.values()) == [1.0]  # the episode ended, its env released


def _verl_tool() -> verl_adapter.AgentGymTool:
    (entry,) = [
        e
        for e in verl_adapter.verl_tool_config([GUESS])["tools"]
        if e["tool_schema"]["function"]["name"] == "say"
    ]
    schema = OpenAIFunctionToolSchema.model_validate(entry["tool_schema"])
    return verl_adapter.AgentGymTool(entry["config"], schema)


async def _verl_call(
    tool: verl_adapter.AgentGymTool, request_id: str, index: int, word: str
) -> tuple[Any, float, dict[str, Any]]:
    """What verl's ToolAgentLoop does for one call: create, execute, release."""
    instance_id, _ = await tool.create(create_kwargs={"task_index": index})
    try:
        return await tool.execute(
            instance_id, {"word": word}, agent_data=SimpleNamespace(request_id=request_id)
        )
    finally:
        await tool.release(instance_id)


def test_verl_tools_share_one_episode_per_rollout() -> None:
    tool = _verl_tool()
    assert isinstance(tool, BaseTool) and tool.name == "say"

    async def rollouts() -> None:
        response, reward, metrics = await _verl_call(tool, "r1", 0, "beta")
        assert isinstance(response, ToolResponse)
        assert (response.text, reward, metrics) == (
            "not beta",
            0.0,
            {"status": "running", "success": False, "done": False},
        )
        other, _, _ = await _verl_call(tool, "r2", 2, "beta")  # a second rollout, another instance
        assert other.text == "not beta"
        response, reward, metrics = await _verl_call(tool, "r1", 0, "alpha")
        assert (response.text, reward, metrics["done"]) == ("right", 1.0, True)
        assert await tool.calc_reward("any", agent_data=SimpleNamespace(request_id="r1")) == 1.0
        response, _, _ = await _verl_call(tool, "r2", 2, "gamma")
        assert response.text == "right"

    open_before = len(verl_adapter.SESSIONS)
    asyncio.run(rollouts())
    assert len(verl_adapter.SESSIONS) == open_before  # ended episodes release their envs
    asyncio.run(_verl_call(tool, "r3", 1, "nope"))
    assert verl_adapter.end_episode(GUESS, "r3") == pytest.approx(-0.2)


def test_verl_tool_config_and_rows_follow_verls_formats(tmp_path: Path) -> None:
    path = tmp_path / "tools.yaml"
    verl_adapter.write_verl_tool_config(str(path), [GUESS, COUNT])
    tools = yaml.safe_load(path.read_text())["tools"]
    assert [t["tool_schema"]["function"]["name"] for t in tools] == ["say", "wait", "die"] * 2
    assert tools[0]["class_name"] == "agentgym_eppo.adapters.verl.AgentGymTool"
    assert tools[3]["config"] == {"type": "native", "task": COUNT, "env_kwargs": {}}
    (row,) = verl_adapter.verl_rows(GUESS, [2])
    assert row["prompt"][1] == {"role": "user", "content": "Guess the word of guess-train-2."}
    assert row["extra_info"]["tools_kwargs"]["say"] == {"create_kwargs": {"task_index": 2}}
    assert row["data_source"] == "agentgym_eppo/guess" and row["agent_name"] == "tool_agent"


# ---------------------------------------------------------------------- EPPO's policy loss


def test_verls_registry_returns_the_eppo_loss() -> None:
    assert get_policy_loss_fn("eppo") is verl_eppo.compute_policy_loss_eppo


def test_pace_batch_takes_each_tasks_response_entropy_once_per_step() -> None:
    pacer = EPPOPacer()
    expected = EPPOPacer()
    steps = [([2.0, 1.0, 4.0], [3.0, 0.5, 9.0]), ([1.0, 1.0, 1.0], [0.9, 0.5, 0.9])]
    for first, second in steps:
        batch = DataProto.from_single_dict(
            {
                "entropys": torch.tensor([first, second, [7.0, 7.0, 7.0]]),
                "response_mask": torch.tensor([[1, 1, 0], [1, 1, 1], [0, 0, 0]]),
                "agentgym_task": np.array(["os", "db", "kg"], dtype=object),
            }
        )
        eps = verl_eppo.pace_batch(pacer, batch)
        # eq. 5 over response tokens only; kg generated no token, so it is not measured
        want = expected.update({"os": sum(first[:2]) / 2, "db": sum(second) / 3})
        assert eps == pytest.approx(want)
        assert batch.batch["eppo_eps"].tolist() == pytest.approx([want["os"], want["db"], 0.2])
        assert batch.meta_info["eppo_tasks"] == ["db", "kg", "os"]
        assert batch.batch["eppo_task"].tolist() == [2, 0, 1]
    assert eps["os"] != pytest.approx(eps["db"])


def actor_config(loss_mode: str = "eppo") -> Any:
    """verl's own actor config from its generated trainer config."""
    config = OmegaConf.load(str(files("verl.trainer.config") / "_generated_ppo_trainer.yaml"))
    actor = config.actor_rollout_ref.actor
    actor.policy_loss.loss_mode = loss_mode
    actor.ppo_micro_batch_size_per_gpu = 2
    return omega_conf_to_dataclass(actor)


def micro_batch(eps: list[float]) -> tuple[dict[str, torch.Tensor], TensorDict, torch.Tensor]:
    """A micro-batch as verl's actor hands it to its loss: two 2-token prompts with
    3-token responses, the model's log-probs unpadded (one row per sequence token),
    every ratio to the old policy 1.25 and every advantage 1."""
    batch, prompt, response = len(eps), 2, 3
    logps = torch.log(torch.tensor([[0.5, 0.4, 0.3]] * batch))
    values = torch.zeros(batch, prompt + response)
    values[:, prompt - 1 : prompt - 1 + response] = logps  # verl shifts log-probs by one
    data = TensorDict(
        {
            "prompts": torch.ones(batch, prompt, dtype=torch.long),
            "responses": torch.ones(batch, response, dtype=torch.long),
            "attention_mask": torch.ones(batch, prompt + response, dtype=torch.long),
            "response_mask": torch.ones(batch, response, dtype=torch.long),
            "old_log_probs": logps - math.log(1.25),
            "advantages": torch.ones(batch, response),
            "eppo_eps": torch.tensor(eps),
        },
        batch_size=[batch],
    )
    for key, value in {"dp_size": 1, "batch_num_tokens": None, "global_batch_size": None}.items():
        tensordict_utils.assign_non_tensor_data(data, key, value)
    return {"log_probs": values.flatten()}, data, logps


def test_the_eppo_loss_in_verls_ppo_loss_equals_our_clipped_loss_per_task_eps() -> None:
    config = actor_config()
    model_output, data, logps = micro_batch([0.2, 0.3])
    loss, metrics = verl_eppo.eppo_ppo_loss(config, model_output, data)
    assert metrics["actor/eppo_eps_mean"].values == [pytest.approx(0.25)]
    ratio = torch.exp(logps - data["old_log_probs"])
    eps = torch.tensor([[0.2], [0.3]])
    ours, _ = clipped_policy_loss(ratio, data["advantages"], 1 - eps, 1 + eps, dual_clip_c=3.0)
    assert loss.item() == pytest.approx(ours.mean().item())  # verl's token-mean
    assert loss.item() == pytest.approx(-(1.2 + 1.25) / 2)  # each sample at its own ε
    # verl's own loss clips every sample at one global ε of 0.2
    vanilla, _ = ppo_loss(actor_config("vanilla"), model_output, micro_batch([0.2, 0.3])[1])
    assert vanilla.item() == pytest.approx(-1.2)


def test_the_eppo_loss_refuses_to_run_without_per_sample_eps() -> None:
    model_output, data, _ = micro_batch([0.2, 0.3])
    with pytest.raises(RuntimeError, match="needs each sample's ε"):
        ppo_loss(actor_config(), model_output, data)


# ---------------------------------------------------------------------- EPPO's trainer


class PlatformCPU(PlatformCUDA):
    """verl's platform on a machine with no GPU: devices are the CPU, collectives gloo.

    verl 0.9.1 registers only GPU/NPU platforms and its FSDP engine only for them; with
    this platform set (and ``VERL_ENGINE_DEVICE=cuda`` choosing that engine), verl's own
    actor worker runs its FSDP2 engine on the CPU."""

    device_name = "cpu"
    vendor_name = "cpu"
    device_module = SimpleNamespace(
        is_available=lambda: True,
        current_device=lambda: "cpu",
        device_count=lambda: 1,
        get_device_name=lambda *_: "CPU",
        set_device=lambda *_: None,
        synchronize=lambda *_: None,
        manual_seed=torch.manual_seed,
        manual_seed_all=torch.manual_seed,
        empty_cache=lambda: None,
        max_memory_allocated=lambda *_: 0,
        max_memory_reserved=lambda *_: 0,
        memory_allocated=lambda *_: 0,
        memory_reserved=lambda *_: 0,
        mem_get_info=lambda *_: (0, 0),
        get_rng_state=torch.get_rng_state,
        set_rng_state=torch.set_rng_state,
    )

    def is_available(self) -> bool:
        return True

    def current_device(self) -> Any:
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        pass

    def synchronize(self, device_index: int | None = None) -> None:
        pass

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def communication_backend_name(self) -> str:
        return "gloo"

    def get_device_capability(self, device_index: int = 0) -> tuple[None, None]:
        return None, None


def eppo_config(tmp_path: Path) -> DictConfig:
    """verl's generated trainer config with EPPO's loss, agentgym-tiny on the CPU (FSDP2,
    eager attention, padded batches, short sequences, nothing compiled), one sample per
    mini-batch."""
    config = trainer_config(tmp_path, response_length=64)
    arr = config.actor_rollout_ref
    arr.rollout.prompt_length = 336  # the prompts with their tools hold 320 tokens
    arr.model.override_config = {"attn_implementation": "eager"}
    arr.model.use_remove_padding = False
    arr.model.enable_gradient_checkpointing = False
    arr.actor.strategy = "fsdp2"
    arr.actor.use_torch_compile = False  # compiling costs minutes on a CPU
    arr.actor.fsdp_config.use_torch_compile = False
    arr.actor.policy_loss.loss_mode = "eppo"
    arr.actor.use_dynamic_bsz = False
    arr.actor.ppo_mini_batch_size = 1
    arr.actor.ppo_micro_batch_size_per_gpu = 1
    arr.rollout.log_prob_micro_batch_size_per_gpu = 2
    config.algorithm.adv_estimator = "grpo"  # no critic
    config.data.dataloader_num_workers = 0
    config.data.train_batch_size = 1
    config.trainer.default_local_dir = str(tmp_path / "checkpoints")
    return config


@pytest.fixture(scope="module")
def actor_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ActorRolloutRefWorker]:
    """verl's actor worker (``ActorRolloutRefWorker``, role ``actor``), in this process on
    the CPU, with EPPO's config: what a Ray worker group of one rank calls."""
    previous, threads = platform_manager._current_platform, torch.get_num_threads()
    platform_manager.set_platform(PlatformCPU())
    torch.set_num_threads(1)  # on a shared CPU, two threads ran its passes 3x slower
    with pytest.MonkeyPatch.context() as env:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        ranks = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
        for key, value in {**ranks, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}.items():
            env.setenv(key, value)
        env.setenv("VERL_ENGINE_DEVICE", "cuda")
        torch.distributed.init_process_group("gloo")
        try:
            config = eppo_config(tmp_path_factory.mktemp("actor"))
            worker = ActorRolloutRefWorker(config=config.actor_rollout_ref, role="actor")
            worker.init_model()
            yield worker
        finally:
            torch.distributed.destroy_process_group()
            platform_manager._current_platform = previous
            torch.set_num_threads(threads)


def eppo_trainer(config: DictConfig, tokenizer: Any, worker: Any) -> verl_eppo.EPPORayPPOTrainer:
    """The trainer as verl's task runner builds it; ``worker`` stands in for the worker
    group that ``init_workers`` (Ray, GPUs) would build, with EPPO's loss installed."""
    rows = verl_adapter.verl_rows(GUESS, [0], agent_name="agentgym_agent")
    trainer = verl_eppo.EPPORayPPOTrainer(
        config=config,
        tokenizer=tokenizer,
        role_worker_mapping={Role.ActorRollout: ActorRolloutRefWorker},
        resource_pool_manager=ResourcePoolManager(resource_pool_spec={}, mapping={}),
        train_dataset=rows,
        val_dataset=rows,
        collate_fn=rl_collate_fn,
    )
    trainer.actor_rollout_wg = worker
    worker.set_loss_fn(trainer.eppo_loss_fn())
    return trainer


def episodes(config: DictConfig, tokenizer: Any) -> DataProto:
    """A step's batch as ``fit`` has it before the old-log-prob pass: an episode of each
    task played by verl's agent loop, with what ``fit`` adds: uids, the response mask,
    the temperature and the token counts."""
    rows = verl_adapter.verl_rows(GUESS, [0], agent_name="agentgym_agent")
    rows += verl_adapter.verl_rows(COUNT, [1], agent_name="agentgym_agent")
    replies = {"guess-train-0": [call("alpha"), call("beta")], "count-train-1": ["No idea."]}
    batch = generate(config, ScriptedServer(config, tokenizer, replies), rows)
    batch.non_tensor_batch["uid"] = np.array(["a", "b"], dtype=object)
    batch.batch["response_mask"] = compute_response_mask(batch)
    batch.meta_info["temperature"] = config.actor_rollout_ref.rollout.temperature
    batch.meta_info["global_token_num"] = batch.batch["attention_mask"].sum(dim=-1).tolist()
    return batch


RATIO = 1.215
"""Between 1 + ε_min and 1 + ε0 · (1 + α tanh 1): of two tasks, the one whose entropy has
collapsed less (z = 1) trains unclipped, the other (z = -1, ε clamped to ε_min) clipped."""
SEEN = {"guess": 1000.0, "count": 9.0}
"""A previous step's entropies (ln 4096 < 9 bounds agentgym-tiny's): both fall after it,
guess's far more than count's."""


def train_step(trainer: Any, batch: DataProto) -> tuple[DataProto, dict[str, Any]]:
    """One step of ``fit`` from the old-log-prob pass to the actor update, in its order:
    the pass, its union into the batch, advantages, the update. The old log-probs are
    lowered by log :data:`RATIO` and the advantages are all 1, so that each sample is
    clipped exactly when ``1 + ε < RATIO`` (the model moves far less than that margin)."""
    old_log_prob, _ = trainer._compute_old_log_prob(batch)
    entropys = old_log_prob.batch.pop("entropys")
    batch = batch.union(old_log_prob)
    batch.batch["old_log_probs"] -= math.log(RATIO)
    batch.batch["advantages"] = batch.batch["response_mask"].float()
    output = trainer._update_actor(batch)
    batch.batch["entropys"] = entropys
    return batch, reduce_metrics(output.meta_info["metrics"])


def task_entropy(batch: DataProto) -> dict[str, float]:
    mask = batch.batch["response_mask"].float()
    tasks = batch.non_tensor_batch["agentgym_task"]
    return {
        task: (
            (batch.batch["entropys"] * mask)[tasks == task].sum() / mask[tasks == task].sum()
        ).item()
        for task in ("guess", "count")
    }


def test_the_eppo_trainer_paces_a_step_logs_per_task_and_resumes_its_pacer(
    tmp_path: Path, tokenizer: Any, actor_worker: Any
) -> None:
    config = eppo_config(tmp_path)
    trainer = eppo_trainer(config, tokenizer, actor_worker)
    assert trainer.pacer.eps0 == config.actor_rollout_ref.actor.clip_ratio_low
    expected = EPPOPacer()
    for pacer in (trainer.pacer, expected):  # a previous step: guess has collapsed more
        pacer.update(SEEN)
    batch, metrics = train_step(trainer, episodes(config, tokenizer))
    eps = expected.update(task_entropy(batch))
    tasks = list(batch.non_tensor_batch["agentgym_task"])
    assert tasks == ["guess", "count"]
    assert batch.batch["eppo_eps"].tolist() == pytest.approx([eps[t] for t in tasks])
    assert eps["guess"] < RATIO - 1 < eps["count"]
    for task in ("guess", "count"):
        assert metrics[f"eppo/{task}/eps"] == pytest.approx(eps[task])
        assert metrics[f"eppo/{task}/zscore"] == pytest.approx(expected.tasks[task].zscore)
        assert metrics[f"eppo/{task}/entropy"] == pytest.approx(task_entropy(batch)[task])
    assert metrics["eppo/guess/clipped_share"] == 1.0  # every ratio ~1.215 > 1 + ε
    assert metrics["eppo/count/clipped_share"] == 0.0
    assert not [key for key in metrics if key.endswith("tokens")]  # folded into the shares
    assert {"actor/pg_loss", "actor/pg_clipfrac", "actor/eppo_eps_mean"} <= metrics.keys()

    trainer.global_steps = 7
    trainer._save_checkpoint()  # verl's: the actor's FSDP state, the dataloader, the tracker
    saved = tmp_path / "checkpoints" / "global_step_7"
    assert (saved / "actor").is_dir() and (saved / "data.pt").is_file()
    assert json.loads((saved / "eppo_pacer.json").read_text()) == trainer.pacer.state_dict()
    resumed = eppo_trainer(eppo_config(tmp_path), tokenizer, actor_worker)
    resumed.global_steps = 0
    resumed._load_checkpoint()  # resume_mode auto: the latest checkpoint
    assert resumed.global_steps == 7
    assert resumed.pacer.state_dict() == trainer.pacer.state_dict()
    later = {"guess": 1.0, "count": 2.0}
    assert resumed.pacer.update(later) == trainer.pacer.update(later)


def test_the_eppo_trainer_takes_its_pacer_from_the_config_and_refuses_what_it_cannot_pace(
    tmp_path: Path, tokenizer: Any
) -> None:
    config = eppo_config(tmp_path)
    config.actor_rollout_ref.actor.clip_ratio_low = 0.25
    config.algorithm.eppo = {"alpha": 0.3, "eps_max": 0.35}
    installed: list[Any] = []  # what the worker group gets
    pacer = eppo_trainer(config, tokenizer, SimpleNamespace(set_loss_fn=installed.append)).pacer
    assert (pacer.eps0, pacer.alpha, pacer.eps_max, pacer.beta) == (0.25, 0.3, 0.35, 0.95)
    (loss_fn,) = installed
    assert loss_fn.func is verl_eppo.eppo_ppo_loss
    assert loss_fn.keywords["config"].clip_ratio_low == 0.25  # verl's ActorConfig
    config = eppo_config(tmp_path)
    config.actor_rollout_ref.actor.policy_loss.loss_mode = "vanilla"
    with pytest.raises(ValueError, match="loss_mode=eppo"):
        eppo_trainer(config, tokenizer, None)
    config = eppo_config(tmp_path)
    config.algorithm.rollout_correction.bypass_mode = True
    with pytest.raises(ValueError, match="bypass_mode"):
        eppo_trainer(config, tokenizer, None)


def test_the_verl_eppo_module_examples_run() -> None:
    assert doctest.testmod(verl_eppo).failed == 0
