"""``run_training(config)``: build or load the policy, SFT warm start, RL, evaluations.

Stages, each skipped when the config says so or a resume already passed it:

1. the policy: a saved checkpoint (``init_checkpoint``, ``model.path``), or a tiny
   Qwen2 plus a BPE tokenizer trained on the expert trajectories' text;
2. ``eval_before_sft.json``; SFT on expert trajectories (``checkpoints/sft``);
   ``eval_after_sft.json``;
3. RL: per step, every slot of the ``MultiTaskVectorEnv`` plays one episode (G slots
   per task instance), then one :class:`~.update.PolicyUpdater` step; metrics to
   ``metrics.jsonl``/TensorBoard, a checkpoint every ``rl.save_every`` steps;
4. ``eval_after_rl.json``; the diagnostics and plots (``agentgym_eppo.trainer.analysis.report``).
"""

from __future__ import annotations

import copy
import importlib
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from transformers import PreTrainedModel
from transformers.utils import logging as transformers_logging

from agentgym_eppo.trainer.algorithms.clip_policies import (
    ClipPolicy,
    EPPOClip,
    make_clip_policy,
    make_pacer,
)
from agentgym_eppo.trainer.algorithms.pacer import EPPOPacer
from agentgym_eppo.trainer.analysis.run_dir import (
    EVAL_STAGES,
    MetricsWriter,
    eval_path,
    evals_split,
    step_record,
    write_eval,
)
from agentgym_eppo.trainer.devices import resolve_bf16, resolve_device
from agentgym_eppo.trainer.distributed.config import ScaleConfig
from agentgym_eppo.trainer.distributed.launch import (
    close_engine,
    make_rollout_engine,
    make_vector_env,
)
from agentgym_eppo.trainer.distributed.ray_cluster import connect
from agentgym_eppo.trainer.rollout.engine import RolloutEngine
from agentgym_eppo.trainer.rollout.episodes import (
    Episode,
    RolloutLimits,
    mixed_groups,
    play_episodes,
    slot_info,
    start_episode,
)
from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine
from agentgym_eppo.trainer.training.models import (
    architecture,
    build_tiny_model,
    build_tokenizer,
    load_policy,
)
from agentgym_eppo.trainer.training.sft import (
    corpus,
    expert_transcript,
    record_expert_episodes,
    sft_train,
)
from agentgym_eppo.trainer.training.update import PolicyUpdater, UpdateSettings

from .analysis.paired_eval import compare_evals, comparison_table
from .checkpoint import (
    latest_checkpoint,
    policy_card,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from .config import TrainConfig, dump_config
from .evaluation import evaluate_policy


def step_seed(seed: int, step: int) -> int:
    """The sampler seed of RL step ``step``: a function of (seed, step) only (exact resume)."""
    return (int(seed) * 1_000_003 + int(step) * 7_919) % (2**31 - 1)


def evaluated_tasks(config: TrainConfig) -> list[str]:
    """The tasks the evaluations play: ``eval.tasks``, else the trained ones."""
    return list(config.eval.tasks) if config.eval.tasks is not None else list(config.tasks)


def env_kwargs_for(config: TrainConfig) -> dict[str, dict[str, Any]]:
    names = dict.fromkeys([*config.tasks, *evaluated_tasks(config)])
    kwargs = {task: dict(config.env_kwargs.get(task, {})) for task in names}
    if config.rollout.max_turns is not None:
        for values in kwargs.values():
            values.setdefault("max_turns", config.rollout.max_turns)
    return kwargs


class Trainer:
    """Holds a run's state between stages; :func:`run_training` drives it."""

    def __init__(self, config: TrainConfig, console: Console | None = None) -> None:
        self.config = config.validate()
        self.run_dir = Path(config.output_dir)
        self.console = console or Console()
        self.bf16 = resolve_bf16(config.bf16)
        self.device = resolve_device(config.device)
        self.env_kwargs = env_kwargs_for(config)
        self.model: PreTrainedModel | None = None
        self.tokenizer: Any = None

    # ------------------------------------------------------------------ policy

    def log(self, message: str) -> None:
        self.console.print(message)

    def load_policy(self, path: str | Path) -> None:
        self.model, self.tokenizer = load_policy(path, self.device)

    def build_policy(self, texts: Sequence[str]) -> None:
        m = self.config.model
        self.tokenizer = build_tokenizer(texts, vocab_size=m.vocab_size)
        self.model = build_tiny_model(self.tokenizer, seed=self.config.seed, **architecture(m))
        self.model = self.model.to(self.device)  # type: ignore[arg-type]
        params = sum(p.numel() for p in self.model.parameters())
        self.log(
            f"built a tiny Qwen2: {params / 1e6:.2f}M parameters, vocabulary {len(self.tokenizer)}"
        )

    def engine(self, batch_size: int | None = None) -> HFGenerateEngine:
        assert self.model is not None
        return HFGenerateEngine(
            self.model,
            eos_token_id=self.tokenizer.eos_token_id,
            pad_token_id=self.tokenizer.pad_token_id,
            batch_size=batch_size or self.config.rollout.generation_batch,
            bf16=self.bf16,
        )

    def limits(self, temperature: float) -> RolloutLimits:
        r = self.config.rollout
        return RolloutLimits(r.max_tokens_per_turn, r.max_context, temperature)

    # ------------------------------------------------------------------ stages

    def evaluate(self, stage: str) -> dict[str, Any] | None:
        if stage not in self.config.eval.stages:
            return None
        started = time.perf_counter()
        e = self.config.eval
        result = evaluate_policy(
            self.engine(),
            self.tokenizer,
            evaluated_tasks(self.config),
            stage=stage,
            split=e.split,
            max_instances=e.max_instances_per_task,
            limits=self.limits(e.temperature),
            slots_per_task=e.slots_per_task,
            backend=self.config.rollout.backend,
            env_kwargs=self.env_kwargs,
            seed=self.config.seed,
            prompt_style=self.config.rollout.prompt,
            samples_per_instance=e.samples_per_instance,
            instances_by_task=e.instances_by_task,
        )
        result["seconds"] = time.perf_counter() - started
        write_eval(self.run_dir, result)
        per_task = ", ".join(f"{t} {v['success']:.2f}" for t, v in result["tasks"].items())
        self.log(
            f"eval {stage} ({e.split}): mean success {result['mean_success']:.3f} ({per_task}) "
            f"in {result['seconds']:.0f}s"
        )
        return result

    def record_experts(self) -> list[Any]:
        from agentgym_eppo.vector import MultiTaskVectorEnv

        s = self.config.sft
        layout = {task: max(1, min(8, s.episodes_per_task)) for task in self.config.tasks}
        started = time.perf_counter()
        venv = MultiTaskVectorEnv(
            layout,
            group_size=1,
            split="train",
            env_kwargs=self.env_kwargs,
            backend=self.config.rollout.backend,
            seed=self.config.seed,
        )
        try:
            counts = {
                task_id: s.episodes_by_task.get(task_id, s.episodes_per_task)
                for task_id in set(venv.task_ids)
            }
            unknown = set(s.episodes_by_task) - set(counts)
            if unknown:
                raise ValueError(
                    f"sft.episodes_by_task names task(s) {sorted(unknown)} that this run does "
                    f"not train (its tasks: {sorted(counts)})"
                )
            episodes = record_expert_episodes(venv, counts, seed=self.config.seed)
        finally:
            venv.close()
        self.log(
            f"recorded {len(episodes)} expert episodes in {time.perf_counter() - started:.0f}s"
        )
        return episodes

    def sft(self, experts: Sequence[Any]) -> None:
        assert self.model is not None
        s = self.config.sft
        transcripts = [
            expert_transcript(self.tokenizer, e, self.config.rollout.prompt) for e in experts
        ]
        tokens = sum(t.generated_tokens for t in transcripts)
        self.log(f"SFT on {len(transcripts)} expert episodes ({tokens} target tokens)")
        started = time.perf_counter()
        with self._progress() as progress:
            bar = progress.add_task("SFT", total=None)

            def on_step(k: int, total: int, loss: float) -> None:
                progress.update(bar, completed=k, total=total, description=f"SFT loss {loss:.3f}")

            losses = sft_train(
                self.model,
                transcripts,
                epochs=s.epochs,
                lr=s.lr,
                batch_episodes=s.batch_episodes,
                micro_batch_tokens=s.micro_batch_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
                seed=self.config.seed,
                bf16=self.bf16,
                warmup_fraction=s.warmup_fraction,
                final_lr_fraction=s.final_lr_fraction,
                on_step=on_step,
            )
        self.log(
            f"SFT: {len(losses)} steps in {time.perf_counter() - started:.0f}s, "
            f"loss {losses[0]:.3f} -> {losses[-1]:.3f}"
        )
        save_checkpoint(
            self.run_dir / "checkpoints" / "sft",
            self.model,
            self.tokenizer,
            card=policy_card(self.config.rollout.prompt),
        )

    def reinforce(self, start_state: Mapping[str, Any] | None = None) -> None:
        """The RL loop (from step 1, or after ``start_state``'s step on resume)."""
        assert self.model is not None
        config = self.config
        model = self.model
        ref_model = None
        if config.algorithm.kl_coef != 0:
            ref_model = copy.deepcopy(model).eval()
            ref_model.requires_grad_(False)
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=config.rl.lr, weight_decay=config.rl.weight_decay
        )
        clip_policy = make_clip_policy(config.clip)
        tracker = make_pacer(config.clip.eppo)  # per-task pace metrics whatever the clip policy
        first_step = 1
        if start_state is not None:
            optimizer.load_state_dict(start_state["optimizer"])
            clip_policy.load_state_dict(start_state["clip"])
            tracker.load_state_dict(start_state["tracker"])
            if ref_model is not None and "ref_model" in start_state:
                ref_model.load_state_dict(start_state["ref_model"])
            set_rng_state(start_state["rng"])
            first_step = int(start_state["step"]) + 1
        r = config.rl
        updater = PolicyUpdater(
            model,
            optimizer,
            clip_policy,
            UpdateSettings.from_config(config, self.bf16),
            pad_token_id=self.tokenizer.pad_token_id,
            ref_model=ref_model,
        )
        scale = ScaleConfig(config.ray, config.engine)
        started_ray = connect(config.ray) if config.ray.address is not None else False
        engine: RolloutEngine | None = None
        writer: MetricsWriter | None = None
        venv: Any = None
        try:  # whatever fails below, nothing started here outlives the call
            engine = make_rollout_engine(
                scale,
                model,
                self.tokenizer,
                self.run_dir,
                self.bf16,
                config.rollout.generation_batch,
                config.seed,
            )
            writer = MetricsWriter(
                self.run_dir,
                tensorboard=config.tensorboard,
                resume_after=first_step - 1 if start_state is not None else None,
            )
            venv = make_vector_env(
                scale,
                config.tasks,
                config.rollout.group_size,
                self.env_kwargs,
                config.seed,
                config.rollout.backend,
            )
            limits = self.limits(config.rollout.temperature)
            with self._progress() as progress:
                bar = progress.add_task("RL", total=r.steps, completed=first_step - 1)
                for step in range(first_step, r.steps + 1):
                    record = self._rl_step(step, venv, engine, updater, tracker, limits)
                    writer.write(record)
                    g = record["global"]
                    progress.update(
                        bar,
                        completed=step,
                        description=f"RL step {step} success {g['success']:.2f} "
                        f"reward {g['reward']:+.2f} loss {g['loss']:+.3f}",
                    )
                    if step % r.save_every == 0 or step == r.steps:
                        self._save_rl(step, optimizer, clip_policy, tracker, ref_model)
        finally:
            if venv is not None:
                venv.close()
            if writer is not None:
                writer.close()
            close_engine(engine, started_ray)

    def _rl_step(
        self,
        step: int,
        venv: Any,
        engine: RolloutEngine,
        updater: PolicyUpdater,
        tracker: EPPOPacer,
        limits: RolloutLimits,
    ) -> dict[str, Any]:
        started = time.perf_counter()
        played, trained, rounds = self._sample(step, venv, engine, limits)
        rollout_seconds = time.perf_counter() - started
        generator = torch.Generator().manual_seed(step_seed(self.config.seed, step))
        result = updater.step(trained, generator)
        engine.update_weights(updater.model)  # the weight sync (a no-op for the in-process engine)
        clip_policy = updater.clip_policy
        if isinstance(clip_policy, EPPOClip) and clip_policy.taskwise:
            paces = clip_policy.pacer.tasks
        else:
            tracker.update(result.task_entropy)
            paces = tracker.tasks
        return step_record(
            step, played, result, paces, rollout_seconds, started, trained=trained, rounds=rounds
        )

    def _sample(
        self, step: int, venv: Any, engine: RolloutEngine, limits: RolloutLimits
    ) -> tuple[list[Episode], list[Episode], int]:
        """One step's episodes: ``(played, trained, rounds)``. One round trains every
        group; with ``rl.dynamic_sampling_rounds`` > 1, further rounds (the instance streams
        go on from the step's seed, so a resumed run draws the same) are played until the
        groups with differing rewards fill one round's worth of groups."""
        played = self._play_round(venv, engine, limits, step_seed(self.config.seed, step))
        most = self.config.rl.dynamic_sampling_rounds
        if most == 1:
            return played, played, 1
        wanted = venv.num_envs // self.config.rollout.group_size
        trained, rounds = mixed_groups(played), 1
        while rounds < most and len({e.group for e in trained}) < wanted:
            more = self._play_round(venv, engine, limits, None)
            played, trained, rounds = played + more, trained + mixed_groups(more), rounds + 1
        return played, trained, rounds

    def _play_round(
        self, venv: Any, engine: RolloutEngine, limits: RolloutLimits, seed: int | None
    ) -> list[Episode]:
        """Reset every slot (reseeding the instance streams with ``seed``, unless None) and
        play the episodes to their ends."""
        observations, infos = venv.reset(seed=seed)
        episodes = [
            start_episode(
                self.tokenizer, i, observations[i], slot_info(infos, i), self.config.rollout.prompt
            )
            for i in range(venv.num_envs)
        ]
        return play_episodes(venv, episodes, engine, self.tokenizer, limits)

    def _save_rl(
        self,
        step: int,
        optimizer: torch.optim.Optimizer,
        clip_policy: ClipPolicy,
        tracker: EPPOPacer,
        ref_model: PreTrainedModel | None,
    ) -> None:
        assert self.model is not None
        state = {
            "step": step,
            "optimizer": optimizer.state_dict(),
            "clip": clip_policy.state_dict(),
            "tracker": tracker.state_dict(),
            "rng": rng_state(),
        }
        if ref_model is not None:
            state["ref_model"] = ref_model.state_dict()
        save_checkpoint(
            self.run_dir / "checkpoints" / f"step_{step}",
            self.model,
            self.tokenizer,
            state,
            keep=self.config.rl.keep_checkpoints,
            card=policy_card(self.config.rollout.prompt),
        )

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=self.console,
            disable=not self.config.progress,
        )


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def run_training(
    config: TrainConfig, console: Console | None = None, stop_after_step: int | None = None
) -> Path:
    """Run every stage of ``config``; return the run directory.

    ``stop_after_step`` ends the RL loop early as if the process were killed after
    that step's checkpoint (tests of exact resume use it).
    """
    transformers_logging.disable_progress_bar()
    if config.skip_unavailable_tasks:
        config = _available_tasks_only(config, console or Console())
    trainer = Trainer(config, console)
    run_dir = trainer.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    _seed_everything(config.seed)
    dump_config(config, run_dir / "config.yaml")
    started = time.perf_counter()
    resume = latest_checkpoint(run_dir / "checkpoints") if config.resume else None
    if resume is not None:
        trainer.log(f"resuming after RL step {resume.state['step']} from {resume.directory}")
        trainer.load_policy(resume.directory)
    else:
        if config.init_checkpoint is not None:
            trainer.load_policy(config.init_checkpoint)
        experts: list[Any] = []
        if config.init_checkpoint is None and (config.model.path is None or config.sft.enabled):
            experts = trainer.record_experts()
        if config.init_checkpoint is None:
            if config.model.path is not None:
                trainer.load_policy(config.model.path)
            else:
                trainer.build_policy(list(corpus(experts)))
            trainer.evaluate("before_sft")
            if config.sft.enabled:
                trainer.sft(experts)
            trainer.evaluate("after_sft")
    limit = config.rl.steps if stop_after_step is None else min(config.rl.steps, stop_after_step)
    if config.rl.steps > 0:
        staged = _with_steps(config, limit)
        trainer.config = staged
        trainer.reinforce(resume.state if resume is not None else None)
        trainer.config = config
    if stop_after_step is None or stop_after_step >= config.rl.steps:
        trainer.evaluate("after_rl")
        _diagnose(trainer)
        _print_summary(trainer, time.perf_counter() - started)
    return run_dir


def _available_tasks_only(config: TrainConfig, console: Console) -> TrainConfig:
    """``config`` without the tasks that are not registered or cannot load the train and
    eval splits here (each one said aloud, with the reason)."""
    import gymnasium as gym

    from agentgym_eppo.vector.layout import resolve_env_id

    kwargs = env_kwargs_for(config)

    def problem(name: str) -> str | None:
        env_id = resolve_env_id(name)
        module, _, registered_id = env_id.rpartition(":")  # gym.make's "module:Env-v0" form
        try:
            if module:
                importlib.import_module(module)
            gym.spec(registered_id)
        except (gym.error.Error, ImportError):
            return "not installed"
        for split in ("train", config.eval.split):
            try:
                env = gym.make(env_id, split=split, **kwargs.get(name, {}))
                try:
                    if env.unwrapped.num_tasks < 1:  # type: ignore[attr-defined]
                        return f"{split} split is empty"
                finally:
                    env.close()
            except Exception as error:  # any reason a task cannot run is a reason to skip it
                return f"{split} split unavailable ({type(error).__name__}: {error})"
        return None

    names = dict.fromkeys([*config.tasks, *evaluated_tasks(config)])
    problems = {name: problem(name) for name in names}
    missing = [name for name, reason in problems.items() if reason is not None]
    if not missing:
        return config
    kept = {name: slots for name, slots in config.tasks.items() if name not in missing}
    if not kept:
        raise ValueError(f"none of the configured tasks can run here: {problems}")
    for name in missing:
        console.print(f"[bold yellow]skipping task {name}: {problems[name]}[/]")
    trimmed = copy.deepcopy(config)
    trimmed.tasks = kept
    if trimmed.eval.tasks is not None:
        trimmed.eval.tasks = [name for name in trimmed.eval.tasks if name not in missing]
    # Per-task settings of a skipped task go with it (they would name a task the run lacks).
    for per_task in (trimmed.sft.episodes_by_task, trimmed.eval.instances_by_task):
        for name in missing:
            per_task.pop(name, None)
    return trimmed.validate()


def _with_steps(config: TrainConfig, steps: int) -> TrainConfig:
    staged = copy.deepcopy(config)
    staged.rl.steps = steps
    return staged


def _diagnose(trainer: Trainer) -> None:
    try:
        from agentgym_eppo.trainer.analysis.report import diagnose_run
    except ImportError:
        trainer.log(
            "plots skipped: agentgym_eppo.trainer.analysis.report (diagnostics) is not installed"
        )
        return
    try:
        report = diagnose_run(trainer.run_dir)
    except FileNotFoundError:  # e.g. SFT only (rl.steps=0) with no eval stage
        trainer.log("diagnostics skipped: the run has neither RL steps nor evaluations")
        return
    trainer.log(f"diagnostics and plots: {report}")


def _print_summary(trainer: Trainer, seconds: float) -> None:
    """Per-task success on the evaluated split, and reward beside it: an RL step can only
    move what its reward reaches, and a policy that stops aborting (-0.2) gains reward
    before success."""
    import json

    stages = []
    for stage in EVAL_STAGES:
        path = eval_path(trainer.run_dir, stage)
        if path.exists():
            stages.append((stage, json.loads(path.read_text(encoding="utf-8"))))
    tasks = sorted({t for _, result in stages for t in result["tasks"]})
    seed = trainer.config.seed
    split = evals_split(result for _, result in stages)
    for measure in ("success", "reward"):
        table = Table(title=f"{split} {measure} per task (seed {seed})")
        table.add_column("stage")
        for task in tasks:
            table.add_column(task, justify="right")
        table.add_column("mean", justify="right")
        for stage, result in stages:
            values = [result["tasks"][t][measure] for t in tasks if t in result["tasks"]]
            table.add_row(
                stage,
                *[
                    f"{result['tasks'][t][measure]:.3f}" if t in result["tasks"] else "-"
                    for t in tasks
                ],
                f"{sum(values) / len(values):.3f}" if values else "-",
            )
        trainer.console.print(table)
    if len(stages) >= 2 and all("episodes" in result for _, result in stages):
        (first, start), (last, end) = stages[0], stages[-1]
        comparison = compare_evals(start, end, seed=seed)
        text = comparison_table(comparison, first, last)
        (trainer.run_dir / "paired_eval.md").write_text(
            f"# {last} against {first}, instance by instance (seed {seed})\n\n{text}\n\n"
            f"Over tasks: {comparison.test}\n",
            encoding="utf-8",
        )
        trainer.log(f"{last} against {first}, paired over instances: {comparison.test}")
    trainer.log(f"run finished in {seconds / 60:.1f} min: {trainer.run_dir}")
