"""Our multi-turn agent RL step against TRL's ``GRPOTrainer(environment_factory=...)``,
driving the same environments, side by side in one run.

For each task family (OS, DB, KG, ALFWorld, WebShop), one RL step is: reset every
episode, play the episodes turn by turn (the model writes a Hermes ``<tool_call>``, the
environment answers), reward them, and take one policy update. Both sides start from one
model (its weights, tokenizer and chat template), by default the shipped ``agentgym-tiny``,
and read their settings from one :class:`~agentgym_eppo.trainer.config.TrainConfig`: its
base model's config in :data:`SETUPS` with that entry's overrides (``configs/demo-cpu.yaml``,
fp32, for agentgym-tiny; ``configs/real-model-why-rl-hurt.yaml``, ``bf16: auto`` on both
sides, for ``smollm2-135m-instruct``). ``--model`` (``BENCH_MODEL``) takes either name or a
checkpoint folder of a run from one (``RUN_DIR/checkpoints/sft``: its run's
``config.yaml`` names the base), e.g. an SFT of SmolLM2, which zero-shot writes no call
(SmolLM2 plays OS, DB and KG, its config's families, unless ``--tasks`` names others):

* **ours**: :func:`~agentgym_eppo.trainer.rl_step.rl_step`, the step ``agentgym-eppo
  train`` runs, with the engine, vector env, updater and pacing built as the trainer
  builds them (:class:`~agentgym_eppo.trainer.rollout.hf.HFGenerateEngine`, which keeps
  each episode's KV cache across turns, and ``MultiTaskVectorEnv``);
* **TRL**: ``GRPOTrainer`` with ``environment_factory`` from our TRL adapter
  (:func:`~agentgym_eppo.adapters.trl.trl_environment_factories`) and its dataset
  (:func:`~agentgym_eppo.adapters.trl.build_multitask_dataset`); its tool-calling loop
  runs plain ``transformers`` ``generate`` once per turn. The same episodes per step,
  group size, tokens per turn (``generation_kwargs.max_new_tokens``), model turns
  (``max_tool_calling_iterations`` = the env's turn limit - 1, so at most as many turns
  as ours), temperature with no top-k or top-p, learning rate, KL coefficient, one
  optimizer step per RL step, the same precision, no gradient checkpointing.

The prompt is the one ``agentgym-tiny`` was trained on and SmolLM2's SFT teaches
(``rollout.prompt: compact``): a system line naming the task and its tools' signatures,
no schema block. TRL always hands the tools to the chat template, so its side renders
with the model's own template told to drop the tool list (``{% set tools = none %}``) and
given tool results and calls in our layout (:data:`TRL_TURNS`; SmolLM2's plain ChatML
has no tool turn of its own); the report states whether the first prompt and a tool turn
came out as the same tokens on both sides. Tool calls are read with TRL's own Qwen/Hermes
response template. TRL's loop cannot see that an environment has ended (an ``answer``
call ends the episode), so it samples on until the model stops calling tools or the turn
limit is reached; those calls are answered with the adapter's "episode is over" note. The
report gives each side's model turns, tool calls run, env steps and sampled tokens per
episode, so the work behind each episodes/s figure is visible.

Medians over the timed steps (after one warm-up step); each side and family in its own
process. Writes ``benchmarks/results/agent_step.md`` and ``.json`` (SmolLM2 and its
checkpoints: ``agent_step_smollm2``): ``python -m benchmarks.run agent_step``; the smallest
size (2 episodes, group 2, one timed step, OS/DB/KG, 2 turns of 48 tokens):
``BENCH_SIZE=quick python -m benchmarks.run agent_step`` or
``python -m benchmarks.bench_agent_step --quick [--tasks db,kg] [--out DIR] [--model M]``;
``BENCH_MODEL=runs/x/checkpoints/sft python -m benchmarks.run agent_step``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from agentgym_eppo.adapters.trl import build_multitask_dataset, trl_environment_factories
from agentgym_eppo.trainer.algorithms.pacer import TaskPacing
from agentgym_eppo.trainer.config import TrainConfig, load_config, read_config_values
from agentgym_eppo.trainer.devices import (
    CPU_FLAGS,
    describe_machine,
    resolve_bf16,
    resolve_device,
)
from agentgym_eppo.trainer.distributed.config import ScaleConfig
from agentgym_eppo.trainer.distributed.launch import make_rollout_engine, make_vector_env
from agentgym_eppo.trainer.rl_step import StepSettings, rl_step, update_settings
from agentgym_eppo.trainer.rollout.chat import (
    compact_system_prompt,
    observation_token_ids,
    prompt_token_ids,
)
from agentgym_eppo.trainer.run import env_kwargs_for
from agentgym_eppo.trainer.training.models import load_policy
from agentgym_eppo.trainer.training.update import PolicyUpdater
from agentgym_eppo.wrappers.session import EpisodeSession
from benchmarks import isolated
from benchmarks.machine import matmul_peak
from benchmarks.report import write_generated

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results"
CONFIGS = ROOT / "configs"
NAME = "agent_step"
ONE_UPDATE = ("rl.mini_batches=1", "rl.ppo_epochs=1")
"""One optimizer step per RL step (TRL's default: one generation batch, one step)."""
DROP_TOOLS = "{%- set tools = none %}"
TRL_TURNS = (
    "{%- set turns = namespace(messages=[]) %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'tool' %}"
    "{%- set turns.messages = turns.messages + [{'role': 'user', 'content': "
    "'<tool_response>\\n' + message.content + '\\n</tool_response>'}] %}"
    "{%- elif message.role == 'assistant' and message.tool_calls %}"
    "{%- set text = namespace(value=message.content or '') %}"
    "{%- for call in message.tool_calls %}"
    "{%- set fn = call.function if call.function is defined else call %}"
    "{%- set arguments = fn.arguments if fn.arguments is string else fn.arguments | tojson %}"
    "{%- if text.value or not loop.first %}{%- set text.value = text.value + '\\n' %}{%- endif %}"
    "{%- set text.value = text.value + '<tool_call>\\n{\"name\": ' + (fn.name | tojson) "
    "+ ', \"arguments\": ' + arguments + '}\\n</tool_call>' %}"
    "{%- endfor %}"
    "{%- set turns.messages = turns.messages + [{'role': 'assistant', 'content': text.value}] %}"
    "{%- else %}{%- set turns.messages = turns.messages + [message] %}{%- endif %}"
    "{%- endfor %}"
    "{%- set messages = turns.messages %}"
)
"""Put before a model's own chat template on TRL's side: its conversation reaches the
template as ours lays an episode out (``rollout/chat.py``): a tool result as a user turn
wrapped in ``<tool_response>`` (``TOOL_TURN``), a call as the Hermes text the model writes.
agentgym-tiny's template renders both so already; SmolLM2's plain ChatML would write a
``tool`` turn the model never saw and drop the calls (TRL refuses such a template)."""


@dataclass(frozen=True)
class ModelSetup:
    """How one base model is benchmarked: the config both sides read their settings from,
    that config's overrides here, the stem of the results files, and the families measured
    where none are named (empty: the size's)."""

    config: Path
    overrides: tuple[str, ...]
    results: str
    tasks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.config.is_file():
            raise ValueError(f"benchmark setup: no config file {self.config}")
        if not self.results:
            raise ValueError(f"benchmark setup of {self.config.name}: no results file name")


SETUPS: dict[str, ModelSetup] = {
    # fp32 (demo-cpu.yaml's own bf16: false, what the shipped model was measured in)
    "agentgym-tiny": ModelSetup(
        CONFIGS / "demo-cpu.yaml", (*ONE_UPDATE, "bf16=false", "progress=false"), NAME
    ),
    # the real-model study's settings, bf16 as it says (auto: where the CPU has native
    # bf16), the same on both sides; its families: its SFT covers neither ALFWorld nor
    # WebShop, whose episodes run to the 3,072-token context (TRL's side trains a step's
    # episodes as one padded batch)
    "smollm2-135m-instruct": ModelSetup(
        CONFIGS / "real-model-why-rl-hurt.yaml",
        (*ONE_UPDATE, "progress=false"),
        f"{NAME}_smollm2",
        ("os", "db", "kg"),
    ),
}
"""The base models this benchmark has settings for, by their names (``model.path``)."""
DEFAULT_MODEL = "agentgym-tiny"


@dataclass(frozen=True)
class Size:
    """Episodes per RL step (GRPO groups of ``group``), timed steps, task families, and
    config overrides of its own."""

    episodes: int
    group: int
    timed: int
    tasks: tuple[str, ...]
    overrides: tuple[str, ...] = ()


SIZES: dict[str, Size] = {
    "full": Size(episodes=8, group=4, timed=5, tasks=("os", "db", "kg", "alfworld", "webshop")),
    "quick": Size(
        episodes=2,
        group=2,
        timed=1,
        tasks=("os", "db", "kg"),
        overrides=("rollout.max_turns=2", "rollout.max_tokens_per_turn=48"),
    ),
}


def base_model(model: str) -> str:
    """The model of :data:`SETUPS` that ``model`` is, or that the run whose checkpoint
    folder it is started from: a trainer's checkpoint sits in ``RUN_DIR/checkpoints/``
    beside the run's ``RUN_DIR/config.yaml``, whose ``model.path`` names the model (a
    checkpoint again is followed back the same way).

    >>> base_model("smollm2-135m-instruct")
    'smollm2-135m-instruct'
    """
    seen = [model]
    while seen[-1] not in SETUPS:
        folder = Path(seen[-1])
        run_config = folder.parent.parent / "config.yaml"
        named = None
        if folder.parent.name == "checkpoints" and run_config.is_file():
            named = (read_config_values(run_config).get("model") or {}).get("path")
        if not isinstance(named, str) or named in seen:
            raise ValueError(
                f"model {model!r}: neither a model this benchmark has settings for "
                f"({', '.join(SETUPS)}) nor a checkpoint folder of a run from one "
                "(RUN_DIR/checkpoints/<name> beside RUN_DIR/config.yaml)"
            )
        seen.append(named)
    return seen[-1]


def model_argument(model: str) -> str:
    """``model`` as the measurements take it: an existing folder as an absolute path (they
    run from the repository root), a name as it is (an existing folder wins, as in
    :func:`~agentgym_eppo.trainer.training.models.resolve_model_path`)."""
    return str(Path(model).resolve()) if Path(model).exists() else model


def train_config(task: str, size: Size, model: str = DEFAULT_MODEL) -> TrainConfig:
    """The config of ``model``'s base (:data:`SETUPS`) with ``model`` as its model, on
    ``task`` alone with ``size``'s episodes and group."""
    setup = SETUPS[base_model(model)]
    return load_config(
        setup.config,
        [
            *setup.overrides,
            *size.overrides,
            f"tasks={{{task}: {size.episodes}}}",
            f"rollout.group_size={size.group}",
            f"model.path={json.dumps(model)}",
        ],
    )


def load_model(config: TrainConfig) -> tuple[Any, Any]:
    """The policy and tokenizer each side starts from: ``config.model.path`` (weights,
    tokenizer and its chat template), in fp32 (:func:`load_policy`)."""
    return load_policy(str(config.model.path))


def _peak_rss_mb() -> float:
    """This process's peak resident memory (``VmHWM``), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# ---------------------------------------------------------------------- the two sides


def _mean(values: Sequence[float]) -> float:
    return float(statistics.fmean(values)) if values else float("nan")


def measure_ours(task: str, size: Size, model_name: str) -> dict[str, Any]:
    """``size.timed + 1`` calls of :func:`rl_step`, its parts built as ``Trainer.reinforce``
    builds them."""
    config = train_config(task, size, model_name)
    bf16 = resolve_bf16(config.bf16, resolve_device(config.device))
    model, tokenizer = load_model(config)
    ref_model = None
    if config.algorithm.kl_coef != 0:
        ref_model = copy.deepcopy(model).eval()
        ref_model.requires_grad_(False)
    clip_policy = config.clip.build()
    pacing = TaskPacing(config.clip.pacer, clip_policy.task_pacer)
    updater = PolicyUpdater(
        model,
        torch.optim.AdamW(model.parameters(), lr=config.rl.lr, weight_decay=config.rl.weight_decay),
        clip_policy,
        update_settings(config, bf16),
        pad_token_id=tokenizer.pad_token_id,
        ref_model=ref_model,
    )
    settings = StepSettings.from_config(config)
    scale = ScaleConfig(config.ray, config.engine)
    steps = []
    with tempfile.TemporaryDirectory() as run_dir:
        engine = make_rollout_engine(
            scale, model, tokenizer, run_dir, bf16, config.rollout.generation_batch, config.seed
        )
        venv = make_vector_env(
            scale,
            config.tasks,
            config.rollout.group_size,
            env_kwargs_for(config),
            config.seed,
            config.rollout.backend,
        )
        try:
            for step in range(1, size.timed + 2):
                started = time.perf_counter()
                outcome = rl_step(step, venv, engine, updater, tokenizer, settings, pacing)
                seconds = time.perf_counter() - started
                played, record = outcome.played, outcome.record["global"]
                steps.append(
                    {
                        "seconds": seconds,
                        "rollout_seconds": float(record["rollout_seconds"]),
                        "update_seconds": float(record["score_seconds"] + record["train_seconds"]),
                        "update_gflop": float(record["update_gflop"]),
                        "episodes": len(played),
                        "sampled_tokens": _mean([e.generated_tokens for e in played]),
                        # every turn goes to the env (a reply without a call ends the episode)
                        "model_turns": _mean([e.turns for e in played]),
                        "env_steps": _mean([e.turns for e in played]),
                        "tool_calls": _mean([e.turns for e in played]),
                        "success": _mean([float(e.success) for e in played]),
                    }
                )
        finally:
            venv.close()
    return {"steps": steps}


def trl_tokenizer(tokenizer: Any, prompt_style: str) -> Any:
    """The tokenizer as TRL's side uses it: calls read with TRL's Qwen/Hermes response
    template; the model's own chat template, given tool results and calls as ours lays
    them out (:data:`TRL_TURNS`) and, under the compact prompt style, told to drop the
    tool list TRL always passes (the system line names the tools instead)."""
    from trl.chat_template_utils import qwen3_template

    tokenizer.response_template = qwen3_template
    drop = DROP_TOOLS if prompt_style == "compact" else ""
    tokenizer.chat_template = drop + TRL_TURNS + tokenizer.chat_template
    return tokenizer


def trl_tool_turn(
    tokenizer: Any, tool: str, content: str, chat_template: str | None = None
) -> list[int]:
    """The tokens TRL's tool loop appends after a call of ``tool`` that returned
    ``content``: TRL's own ``GRPOTrainer._get_tool_suffix_ids`` on the tokenizer as TRL's
    side holds it (``chat_template``: the one TRL renders with instead, where it replaced
    a template that does not keep prefixes; ``trainer.chat_template``)."""
    from types import SimpleNamespace

    from trl import GRPOTrainer

    held = SimpleNamespace(
        processing_class=tokenizer,
        _tokenizer=tokenizer,
        chat_template=chat_template,
        chat_template_kwargs={},
        _is_vlm=False,
    )
    message = {"role": "tool", "name": tool, "content": content}
    # the method reads only these attributes of its trainer
    return list(GRPOTrainer._get_tool_suffix_ids(held, [message]))  # type: ignore[arg-type]


def trl_dataset(task: str, config: TrainConfig, rows: int) -> Any:
    """The adapter's dataset for ``task``; under the compact style each row's system turn
    is the compact line our rollouts write."""
    kwargs = env_kwargs_for(config)
    dataset = build_multitask_dataset([task], rows, seed=config.seed, env_kwargs=kwargs)
    if config.rollout.prompt != "compact":
        return dataset
    session = EpisodeSession(task, kwargs.get(task))
    try:
        system = compact_system_prompt(session.task_id, session.tools)
    finally:
        session.close()
    return dataset.map(
        lambda row: {"prompt": [{"role": "system", "content": system}, *row["prompt"][1:]]}
    )


def prompt_check(
    task: str, config: TrainConfig, trl_side: Any, ours: Any, chat_template: str | None = None
) -> dict[str, Any]:
    """Instance 0's first prompt as each side tokenizes it: lengths and whether they match;
    and whether a tool turn (the task text standing in for an environment's reply, then
    the next assistant turn's opening) comes out as the same tokens (``chat_template``:
    TRL's own, where it replaced the tokenizer's; see :func:`trl_tool_turn`)."""
    session = EpisodeSession(task, env_kwargs_for(config).get(task))
    try:
        text = session.start(index=0)
        tools = session.tools
        system = session.system_prompt
        if config.rollout.prompt == "compact":
            system = compact_system_prompt(session.task_id, tools)
        ids = prompt_token_ids(
            ours, session.system_prompt, text, tools, config.rollout.prompt, session.task_id
        )
    finally:
        session.close()
    rendered = trl_side.apply_chat_template(
        [{"role": "system", "content": system}, {"role": "user", "content": text}],
        tools=tools,
        chat_template=chat_template,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
    )["input_ids"]
    tool = str(tools[0].get("function", tools[0])["name"]) if tools else "tool"
    turn = trl_tool_turn(trl_side, tool, text, chat_template)
    return {
        "ours": len(ids),
        "trl": len(rendered),
        "same": list(ids) == list(rendered),
        "tool_turn_same": observation_token_ids(ours, text) == turn,
    }


def measure_trl(task: str, size: Size, model_name: str) -> dict[str, Any]:
    """``size.timed + 1`` steps of TRL's ``GRPOTrainer`` over the adapter's environments."""
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    config = train_config(task, size, model_name)
    r = config.rollout
    bf16 = resolve_bf16(config.bf16, resolve_device(config.device))
    model, tokenizer = load_model(config)
    _, ours_tokenizer = load_model(config)
    tokenizer = trl_tokenizer(tokenizer, r.prompt)
    kwargs = env_kwargs_for(config)
    max_turns = int(kwargs[task]["max_turns"])

    class StepTimer(TrainerCallback):
        """Each step's time, and its rollout's: the resets plus ``_generate`` (prompts,
        sampling and the tool-calling loop), as ours counts its resets and turns."""

        def __init__(self) -> None:
            self.trainer: Any = None
            self.started = self.rollout = 0.0
            self.model_turns: list[int] = []
            self.steps: list[dict[str, float]] = []

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.started, self.rollout, self.model_turns = time.perf_counter(), 0.0, []

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            seconds = time.perf_counter() - self.started
            sessions = [env._session for env in self.trainer.environments]
            self.steps.append(
                {
                    "seconds": seconds,
                    "rollout_seconds": self.rollout,
                    "episodes": len(sessions),
                    "model_turns": _mean(self.model_turns),
                    "env_steps": _mean([s.turns for s in sessions]),
                    "success": _mean([float(s.info.get("success", False)) for s in sessions]),
                }
            )

    timer = StepTimer()

    class TimedGRPOTrainer(GRPOTrainer):
        def _generate(self, prompts: list[Any]) -> Any:
            started = time.perf_counter()
            out = super()._generate(prompts)
            timer.rollout += time.perf_counter() - started
            completions = out[3]  # one list of messages per rollout
            timer.model_turns += [
                sum(message["role"] == "assistant" for message in messages)
                for messages in completions
            ]
            return out

    def timed_reset(self: Any, **row: Any) -> str:
        started = time.perf_counter()
        text = str(environment.reset(self, **row))
        timer.rollout += time.perf_counter() - started
        return text

    environment = trl_environment_factories([task], kwargs)[task]
    timed_environment = type(environment.__name__, (environment,), {"reset": timed_reset})
    steps = size.timed + 1
    with tempfile.TemporaryDirectory() as output_dir:
        args = GRPOConfig(
            output_dir=output_dir,
            max_steps=steps,
            per_device_train_batch_size=size.episodes,
            num_generations=size.group,
            # ours: prompt + episode <= max_context; TRL's budget counts the episode only
            max_completion_length=r.max_context,
            max_tool_calling_iterations=max_turns - 1,
            generation_kwargs={"max_new_tokens": r.max_tokens_per_turn},
            temperature=r.temperature,
            top_k=0,
            top_p=1.0,
            learning_rate=config.rl.lr,
            weight_decay=config.rl.weight_decay,
            max_grad_norm=config.rl.max_grad_norm,
            lr_scheduler_type="constant",
            beta=config.algorithm.kl_coef,
            num_iterations=config.rl.ppo_epochs,
            logging_steps=1,
            report_to=[],
            use_cpu=True,
            save_strategy="no",
            seed=config.seed,
            dataloader_num_workers=0,
            bf16=bf16,
            gradient_checkpointing=False,  # ours keeps activations; so does this side
        )
        trainer = TimedGRPOTrainer(
            model=model,
            processing_class=tokenizer,
            args=args,
            train_dataset=trl_dataset(task, config, steps * size.episodes // size.group),
            environment_factory={task: timed_environment},
            callbacks=[timer],
        )
        timer.trainer = trainer
        trainer.train()
    logs = [e for e in trainer.state.log_history if "completions/mean_length" in e]
    for record, log in zip(timer.steps, logs, strict=True):
        record["sampled_tokens"] = float(log["completions/mean_length"])
        record["tool_calls"] = float(log.get("tools/call_frequency", 0.0))
    check = prompt_check(task, config, tokenizer, ours_tokenizer, trainer.chat_template)
    return {"steps": timer.steps, "prompt": check}


SIDES: dict[str, Callable[[str, Size, str], dict[str, Any]]] = {
    "ours": measure_ours,
    "trl": measure_trl,
}


def run_one(spec: Mapping[str, str]) -> dict[str, Any]:
    """One side on one task family, in this process."""
    size = SIZES[spec["size"]]
    torch.set_num_threads(int(train_config(spec["task"], size, spec["model"]).threads or 1))
    torch.manual_seed(0)
    result = SIDES[spec["side"]](spec["task"], size, spec["model"])
    result["peak_rss_mb"] = _peak_rss_mb()
    return result


def in_subprocess(spec: Mapping[str, Any]) -> dict[str, Any]:
    """One measurement of this benchmark in a fresh process (:mod:`benchmarks.isolated`)."""
    return isolated.in_subprocess("benchmarks.bench_agent_step", spec)


# ---------------------------------------------------------------------- summary and report


def summarize(side: Mapping[str, Any]) -> dict[str, Any]:
    """Medians over the timed steps (the first step is the warm-up)."""
    timed = side["steps"][1:]

    def median(key: str) -> float:
        return float(statistics.median(step[key] for step in timed))

    summary = {key: median(key) for key in timed[0]}
    summary["episodes_per_s"] = float(
        statistics.median(step["episodes"] / step["seconds"] for step in timed)
    )
    summary["peak_rss_mb"] = side["peak_rss_mb"]
    return summary


def machine() -> dict[str, Any]:
    """CPU model, its vector flags, cores, torch version (as a training run records them)."""
    described = describe_machine()
    return {
        "cpu": described["cpu"],
        "flags": described["cpu_flags"],
        "cores": described["cores"],
        "native_bf16": resolve_bf16("auto", torch.device("cpu")),
        "torch": described["torch"],
    }


def precision(config: TrainConfig) -> tuple[str, str]:
    """What ``config.bf16`` comes to on this machine, for ours and for TRL: the same bf16
    or fp32 flag goes to both sides."""
    if resolve_bf16(config.bf16, resolve_device(config.device)):
        return (
            "bf16: sampling with a bf16 copy of the weights, update under autocast",
            "bf16 autocast (`bf16=True`: sampling and update)",
        )
    fp = "fp32 (`bf16: auto`: no native bf16 on this CPU)" if config.bf16 == "auto" else "fp32"
    return fp, fp


def settings_table(config: TrainConfig, size: Size, task: str) -> list[tuple[str, str, str]]:
    """``(setting, ours, TRL)`` rows: what each side was told."""
    import transformers
    import trl

    r, a, rl = config.rollout, config.algorithm, config.rl
    turns = int(env_kwargs_for(config)[task]["max_turns"])
    ours_fp, trl_fp = precision(config)
    return [
        ("library", "agentgym-eppo `rl_step`", f"TRL {trl.__version__} `GRPOTrainer` "
         f"(transformers {transformers.__version__})"),
        ("model", f"`{config.model.path}`", f"`{config.model.path}` (same weights, tokenizer)"),
        ("episodes per step / group", f"{size.episodes} / {size.group}",
         f"`per_device_train_batch_size` {size.episodes} / `num_generations` {size.group}"),
        ("env", f"`MultiTaskVectorEnv` ({r.backend})", "`environment_factory` (adapters.trl)"),
        ("turns", f"env's `max_turns` {turns} (ALFWorld: `env_kwargs`)",
         f"`max_tool_calling_iterations` {turns - 1}: at most {turns} model turns"),
        ("tokens per turn", str(r.max_tokens_per_turn),
         f"`generation_kwargs.max_new_tokens` {r.max_tokens_per_turn}"),
        ("episode budget", f"prompt + episode <= {r.max_context}",
         f"`max_completion_length` {r.max_context} (episode only)"),
        ("sampling", f"temperature {r.temperature}, no top-k/top-p",
         f"temperature {r.temperature}, `top_k` 0, `top_p` 1"),
        ("prompt", f"`{r.prompt}`", f"`{r.prompt}` system line; template drops the tool list"
         if r.prompt == "compact" else f"`{r.prompt}`"),
        ("chat template", "the model's own for the prompt; tool turns as `rollout/chat.py` "
         "writes them (`TOOL_TURN`)", "the model's own, given tool results and calls in that "
         "layout (`TRL_TURNS`)"),
        ("rollout engine", "`HFGenerateEngine` (KV cache kept across turns)",
         "`model.generate` per turn (conversation encoded again)"),
        ("loss", f"{a.advantage}, clip `{config.clip.policy}`, KL {a.kl_coef}",
         f"TRL's default loss, `beta` {a.kl_coef}"),
        ("optimizer", f"AdamW lr {rl.lr}, weight decay {rl.weight_decay}, "
         f"{rl.mini_batches} step per RL step", f"AdamW lr {rl.lr} (constant), weight decay "
         f"{rl.weight_decay}, 1 step per RL step"),
        ("precision / threads", f"{ours_fp} / {config.threads}", f"{trl_fp} / "
         f"{config.threads}, `gradient_checkpointing` off"),
    ]  # fmt: skip


def report(results: Mapping[str, Any]) -> list[str]:
    m, size = results["machine"], SIZES[results["size_name"]]
    model, base = results["model"], results["base_model"]
    before, after = results["load_before"], results["load_after"]
    # the load after includes this run's own threads: only the load before says whether
    # something else ran
    loaded = before[0] >= 0.5
    lines = [
        "# Agent RL step: ours vs TRL `GRPOTrainer(environment_factory=...)`",
        "",
        f"- Date: {results['date']} UTC; CPU: {m['cpu']}, {m['cores']} cores, flags "
        f"{' '.join(m['flags']) or 'none of ' + ', '.join(CPU_FLAGS)}; torch {m['torch']}.",
        f"- Load average (1/5/15 min): {'/'.join(f'{x:.1f}' for x in before)} before, "
        f"{'/'.join(f'{x:.1f}' for x in after)} after (this run's own threads included)."
        + (
            " **Something else was running when this started: these are not idle figures.**"
            if loaded
            else ""
        ),
        f"- Model: `{base}`"
        + (f", the checkpoint `{model}`" if model != base else "")
        + ": the same weights, tokenizer and chat template on both sides.",
        f"- Size `{results['size_name']}`: {size.episodes} episodes per step in groups of "
        f"{size.group}; medians over {size.timed} timed step(s) after one warm-up; each side "
        "and family in its own process"
        + (
            f"; this size's overrides: {', '.join(f'`{o}`' for o in size.overrides)}."
            if size.overrides
            else "."
        ),
        "",
        "| family | ours, episodes/s | TRL, episodes/s | ours / TRL | ours step, s (rollout) "
        "| TRL step, s (rollout) | sampled tokens / episode, ours / TRL | model turns / episode, "
        "ours / TRL | tool calls run / episode, ours / TRL | env steps / episode, ours / TRL "
        "| success, ours / TRL "
        "| peak RSS, MB, ours / TRL |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for task, entry in results["tasks"].items():
        o, t = entry["ours"], entry["trl"]
        lines.append(
            f"| {task} | {o['episodes_per_s']:.2f} | {t['episodes_per_s']:.2f} "
            f"| {entry['ratio']:.2f} | {o['seconds']:.2f} ({o['rollout_seconds']:.2f}) "
            f"| {t['seconds']:.2f} ({t['rollout_seconds']:.2f}) "
            f"| {o['sampled_tokens']:.0f} / {t['sampled_tokens']:.0f} "
            f"| {o['model_turns']:.1f} / {t['model_turns']:.1f} "
            f"| {o['tool_calls']:.1f} / {t['tool_calls']:.1f} "
            f"| {o['env_steps']:.1f} / {t['env_steps']:.1f} "
            f"| {o['success']:.2f} / {t['success']:.2f} "
            f"| {o['peak_rss_mb']:.0f} / {t['peak_rss_mb']:.0f} |"
        )
    lines += [
        "",
        "Our update (the scoring, reference and training passes of `PolicyUpdater.step`) "
        "against this machine's fp32 matmul peak, measured before the run at the same "
        f"threads: {results['fp32_peak_gflops']:.0f} GFLOP/s (2048 x 2048, best of 5). "
        "FLOPs: 2 x parameters per token plus causal attention per pass, over every episode "
        "with a loss token, padding not counted; medians over the timed steps.",
        "",
        "| family | update, s | update, GFLOP | GFLOP/s | share of the fp32 peak |",
        "|---|---|---|---|---|",
    ]
    for task, entry in results["tasks"].items():
        o = entry["ours"]
        rate = o["update_gflop"] / o["update_seconds"]
        lines.append(
            f"| {task} | {o['update_seconds']:.2f} | {o['update_gflop']:.1f} | {rate:.0f} "
            f"| {rate / results['fp32_peak_gflops']:.0%} |"
        )
    lines += [
        "",
        "Episodes/s: episodes per step over the whole step (reset, rollout, reward, update); "
        "rollout: the resets and the turns. Per episode: sampled tokens, model turns, tool "
        "calls run, env steps (what the environment counted) and success. Ours sends every "
        "turn to the environment, which ends the episode at a reply without a call. TRL runs "
        "the calls of all turns but the last one its iteration limit allows, and goes on "
        "sampling after an episode has ended (its loop cannot see the end): those calls get "
        "the adapter's note and count as calls run, not as env steps.",
        "",
        "First prompt (instance 0) in tokens, ours / TRL, and whether the ids match; then "
        "whether a tool turn (an environment's reply and the next turn's opening) does: "
        + "; ".join(
            f"{task} {e['prompt']['ours']} / {e['prompt']['trl']} "
            f"({'same' if e['prompt']['same'] else 'differ'}, tool turn "
            f"{'same' if e['prompt']['tool_turn_same'] else 'differs'})"
            for task, e in results["tasks"].items()
        )
        + ".",
        "",
        f"Settings (from `{results['config']}` with "
        + ", ".join(f"`{o}`" for o in results["overrides"])
        + f"; shown for {next(iter(results['tasks']))}):",
        "",
        "| setting | ours | TRL |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {ours} | {peer} |" for name, ours, peer in results["settings"]]
    option = f"BENCH_MODEL={model} " if model != DEFAULT_MODEL else ""
    lines += [
        "",
        f"Run: `{option}python -m benchmarks.run {NAME}` (`BENCH_SIZE=quick` for the smallest "
        "size).",
    ]
    return lines


def main(
    size_name: str | None = None,
    tasks: Sequence[str] | None = None,
    out_dir: Path = RESULTS_DIR,
    model: str | None = None,
) -> dict[str, Any]:
    """Measure every family on both sides from ``model`` (a name of :data:`SETUPS` or a
    checkpoint folder of a run from one; default ``BENCH_MODEL``, else agentgym-tiny);
    write ``<out_dir>/<results>.md`` and ``.json``, ``results`` its base model's
    (``agent_step`` for agentgym-tiny)."""
    size_name = size_name or os.environ.get("BENCH_SIZE", "full")
    size = SIZES[size_name]
    model = model_argument(model or os.environ.get("BENCH_MODEL", DEFAULT_MODEL))
    base = base_model(model)
    setup = SETUPS[base]
    tasks = list(tasks or setup.tasks or size.tasks)
    load_before = os.getloadavg()
    torch.set_num_threads(int(train_config(tasks[0], size, model).threads or 1))
    fp32_peak = matmul_peak(torch.float32)
    entries: dict[str, Any] = {}
    for task in tasks:
        spec = {"task": task, "size": size_name, "model": model}
        raw = {side: in_subprocess({"side": side, **spec}) for side in SIDES}
        sides = {side: summarize(result) for side, result in raw.items()}
        entries[task] = {
            **sides,
            "ratio": sides["ours"]["episodes_per_s"] / sides["trl"]["episodes_per_s"],
            "prompt": raw["trl"]["prompt"],
        }
    results = {
        "date": f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M}",
        "machine": machine(),
        "load_before": list(load_before),
        "load_after": list(os.getloadavg()),
        "fp32_peak_gflops": fp32_peak,
        "model": model,
        "base_model": base,
        "config": str(setup.config.relative_to(ROOT)),
        "overrides": list(setup.overrides),
        "size_name": size_name,
        "size": asdict(size),
        "settings": settings_table(train_config(tasks[0], size, model), size, tasks[0]),
        "tasks": entries,
    }
    lines = report(results)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_generated(out_dir / f"{setup.results}.md", "\n".join(lines))
    (out_dir / f"{setup.results}.json").write_text(
        json.dumps(results, indent=1) + "\n", encoding="utf-8"
    )
    print("\n".join(lines))
    return results


def _arguments(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the smallest size")
    parser.add_argument(
        "--tasks", help="comma-separated families (default: the model's, else the size's)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="results folder")
    parser.add_argument(
        "--model",
        help=f"a model name ({', '.join(SETUPS)}) or a checkpoint folder of a run from one "
        "(default: BENCH_MODEL, else agentgym-tiny)",
    )
    parser.add_argument("--one", help="one measurement, as JSON (used by main)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    options = _arguments(sys.argv[1:])
    if options.one:
        print(json.dumps(run_one(json.loads(options.one))))
    else:
        main(
            "quick" if options.quick else None,
            options.tasks.split(",") if options.tasks else None,
            options.out,
            options.model,
        )
