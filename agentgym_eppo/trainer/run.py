"""``run_training(config)``: build or load the policy, SFT warm start, RL, evaluations.

Stages, each skipped when the config says so or a resume already passed it:

1. the policy: a saved checkpoint (``init_checkpoint``, ``model.path``), or a tiny
   Qwen2 plus a BPE tokenizer trained on the expert trajectories' text;
2. ``eval_base.json`` (the policy before any training); SFT on expert trajectories (``checkpoints/sft``);
   ``eval_after_sft.json``; a state every ``sft.save_every`` SFT steps (``sft_state/``), from
   which a resume without an RL checkpoint continues the SFT on the re-recorded experts;
3. RL: per step, every slot of the ``MultiTaskVectorEnv`` plays one episode (G slots
   per task instance), then one :class:`~.update.PolicyUpdater` step; metrics to
   ``metrics.jsonl``/TensorBoard, a checkpoint every ``rl.save_every`` steps;
4. ``eval_after_rl.json``; the diagnostics and plots (``agentgym_eppo.trainer.analysis.report``).
"""

from __future__ import annotations

import copy
import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import Progress
from transformers import PreTrainedModel
from transformers.utils import logging as transformers_logging

from agentgym_eppo.trainer.algorithms.clip_policies import ClipPolicy
from agentgym_eppo.trainer.algorithms.pacer import TaskPacing
from agentgym_eppo.trainer.analysis.run_dir import (
    MetricsWriter,
    eval_path,
    record_machine,
    write_eval,
    write_sft_record,
)
from agentgym_eppo.trainer.analysis.summary import print_summary
from agentgym_eppo.trainer.devices import describe_machine, resolve_bf16, resolve_device
from agentgym_eppo.trainer.distributed.config import ScaleConfig
from agentgym_eppo.trainer.distributed.launch import (
    close_engine,
    make_rollout_engine,
    make_vector_env,
)
from agentgym_eppo.trainer.distributed.ray_cluster import connect
from agentgym_eppo.trainer.progress import live_bar, progress_bar
from agentgym_eppo.trainer.rl_step import StepSettings, rl_step, update_settings
from agentgym_eppo.trainer.rollout.engine import RolloutEngine
from agentgym_eppo.trainer.rollout.episodes import RolloutLimits
from agentgym_eppo.trainer.rollout.evaluation import evaluate_policy
from agentgym_eppo.trainer.rollout.hf import HFGenerateEngine
from agentgym_eppo.trainer.training.checkpoint import (
    ResumePoint,
    latest_checkpoint,
    policy_card,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from agentgym_eppo.trainer.training.models import (
    architecture,
    build_tiny_model,
    build_tokenizer,
    load_policy,
    set_gradient_checkpointing,
)
from agentgym_eppo.trainer.training.sft import (
    EarlyStop,
    corpus,
    expert_transcript,
    record_expert_episodes,
    sft_train,
    split_held_out,
    warmup_factor,
)
from agentgym_eppo.trainer.training.update import PolicyUpdater
from agentgym_eppo.vector.availability import task_problem

from .config import TrainConfig, dump_config


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
        self.config = config
        self.run_dir = Path(config.output_dir)
        self.console = console or Console()
        self.device = resolve_device(config.device)
        self.bf16 = resolve_bf16(config.bf16, self.device)
        self.env_kwargs = env_kwargs_for(config)
        self.model: PreTrainedModel | None = None
        self.tokenizer: Any = None

    # ------------------------------------------------------------------ policy

    def log(self, message: str) -> None:
        self.console.print(message)

    @property
    def live_bar(self) -> bool:
        """A progress bar only where one can redraw (``progress`` on, a terminal); in a
        log file, under ``nohup`` or in CI, every stage and RL step is a line instead,
        written as it happens."""
        return live_bar(self.config.progress, self.console)

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
        self.log(f"eval {stage} ({e.split}): playing {', '.join(evaluated_tasks(self.config))}")
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
            instance_seed=e.instance_seed,
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
            counts = {  # the held-out instances' episodes come on top
                task_id: s.episodes_by_task.get(task_id, s.episodes_per_task) + s.held_out_per_task
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

    def sft(self, experts: Sequence[Any], resume_state: Mapping[str, Any] | None = None) -> None:
        """The SFT stage; ``resume_state`` (from ``sft_state/``) continues an interrupted one."""
        assert self.model is not None
        s = self.config.sft
        experts, held_out = split_held_out(experts, s.held_out_per_task)
        transcripts = [
            expert_transcript(self.tokenizer, e, self.config.rollout.prompt) for e in experts
        ]
        held_transcripts = [
            expert_transcript(self.tokenizer, e, self.config.rollout.prompt) for e in held_out
        ]
        early_stop = (
            EarlyStop(
                held_transcripts,
                every=s.held_out_every,
                patience=s.patience,
                task_ids=[e.task_id for e in held_out],
                average=s.held_out_average,
            )
            if held_out
            else None
        )
        tokens = sum(t.generated_tokens for t in transcripts)
        held_out_tokens: Counter[str] = Counter()
        for episode, transcript in zip(held_out, held_transcripts, strict=True):
            held_out_tokens[episode.task_id] += transcript.generated_tokens
        self.log(
            f"SFT on {len(transcripts)} expert episodes ({tokens} target tokens), "
            f"{len(held_out)} held out"
        )
        started = time.perf_counter()
        with self._progress() as progress:
            bar = progress.add_task("SFT", total=None)

            def on_step(k: int, total: int, loss: float) -> None:
                progress.update(bar, completed=k, total=total, description=f"SFT loss {loss:.3f}")

            def on_save(state: dict[str, Any]) -> None:
                assert self.model is not None
                directory = self.run_dir / SFT_STATE / f"step_{state['step']}"
                save_checkpoint(directory, self.model, self.tokenizer, state, keep=1)

            if s.gradient_checkpointing:
                set_gradient_checkpointing(self.model, True)
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
                early_stop=early_stop,
                save_every=s.save_every,
                on_save=on_save,
                resume=resume_state,
            )
            if s.gradient_checkpointing:  # RL's update keeps its activations
                set_gradient_checkpointing(self.model, False)
        seconds = time.perf_counter() - started
        self.log(
            f"SFT: {len(losses)} steps in {seconds:.0f}s, loss {losses[0]:.3f} -> {losses[-1]:.3f}"
            + (
                f"; held-out loss {early_stop.curve[0][1]:.3f} -> "
                f"{min(v for _, v in early_stop.curve):.3f}, weights of step {early_stop.best_step}"
                if early_stop is not None
                else ""
            )
        )
        write_sft_record(
            self.run_dir,
            {
                "episodes": dict(Counter(e.task_id for e in experts)),
                "held_out": dict(Counter(e.task_id for e in held_out)),
                "target_tokens": tokens,
                "sequence_tokens": sum(len(t) for t in transcripts),
                "losses": losses,
                "held_out_curve": early_stop.curve if early_stop is not None else [],
                "held_out_by_task": early_stop.by_task if early_stop is not None else [],
                "held_out_average": s.held_out_average,
                "held_out_tokens": dict(held_out_tokens),
                "best_step": early_stop.best_step if early_stop is not None else len(losses),
                "stopped_early": early_stop is not None and early_stop.stopped_early,
                "seconds": seconds,
            },
        )
        save_checkpoint(
            self.run_dir / "checkpoints" / "sft",
            self.model,
            self.tokenizer,
            card=policy_card(self.config.rollout.prompt),
        )

    def reinforce(self, start_state: Mapping[str, Any] | None, last_step: int) -> None:
        """The RL loop: steps from 1 (or after ``start_state``'s step on resume) to
        ``last_step``, each one :func:`~agentgym_eppo.trainer.rl_step.rl_step`; a
        checkpoint every ``rl.save_every`` steps and at ``last_step``."""
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
        clip_policy = config.clip.build()
        pacing = TaskPacing(config.clip.pacer, clip_policy.task_pacer)
        first_step = 1
        if start_state is not None:
            optimizer.load_state_dict(start_state["optimizer"])
            # the tracker first: when the clip's pacer is the run's pacer, the clip's state
            # is the one it kept
            pacing.pacer.load_state_dict(start_state["tracker"])
            clip_policy.load_state_dict(start_state["clip"])
            if ref_model is not None and "ref_model" in start_state:
                ref_model.load_state_dict(start_state["ref_model"])
            set_rng_state(start_state["rng"])
            first_step = int(start_state["step"]) + 1
        updater = PolicyUpdater(
            model,
            optimizer,
            clip_policy,
            update_settings(config, self.bf16),
            pad_token_id=self.tokenizer.pad_token_id,
            ref_model=ref_model,
        )
        settings = StepSettings.from_config(config)
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
            self.log(f"RL steps {first_step}-{last_step} on {', '.join(config.tasks)}")
            with self._progress() as progress:
                bar = progress.add_task("RL", total=last_step, completed=first_step - 1)
                for step in range(first_step, last_step + 1):
                    # the warm-up counts RL steps (a function of the step: resume needs
                    # no state); every optimizer step of an RL step runs at its rate
                    rate = config.rl.lr * warmup_factor(step - 1, config.rl.warmup_steps)
                    for group in optimizer.param_groups:
                        group["lr"] = rate
                    outcome = rl_step(step, venv, engine, updater, self.tokenizer, settings, pacing)
                    writer.write(outcome.record)
                    g = outcome.record["global"]
                    summary = (
                        f"success {g['success']:.2f} reward {g['reward']:+.2f} "
                        f"loss {g['loss']:+.3f}"
                    )
                    progress.update(bar, completed=step, description=f"RL step {step} {summary}")
                    if not self.live_bar:
                        self.log(f"RL step {step}/{last_step}: {g['seconds']:.0f}s {summary}")
                    if step % config.rl.save_every == 0 or step == last_step:
                        self._save_rl(step, optimizer, clip_policy, pacing, ref_model)
        finally:
            if venv is not None:
                venv.close()
            if writer is not None:
                writer.close()
            close_engine(engine, started_ray)

    def _save_rl(
        self,
        step: int,
        optimizer: torch.optim.Optimizer,
        clip_policy: ClipPolicy,
        pacing: TaskPacing,
        ref_model: PreTrainedModel | None,
    ) -> None:
        assert self.model is not None
        state = {
            "step": step,
            "optimizer": optimizer.state_dict(),
            "clip": clip_policy.state_dict(),
            "tracker": pacing.pacer.state_dict(),
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
        return progress_bar(self.console, self.live_bar)


SFT_STATE = "sft_state"
"""The run folder's SFT states (``step_N``, ``latest``): the weights, tokenizer and
``trainer_state.pt`` of :func:`~agentgym_eppo.trainer.training.sft.sft_train`'s saves."""


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@dataclass(frozen=True)
class RunPlan:
    """What a run does before RL, decided once from the config and the run directory.

    ``policy_from`` is the directory the policy loads from (a resumed run's checkpoint,
    ``init_checkpoint``, ``model.path``), None to build a tiny model on the experts' text;
    ``warm_start`` runs the before-RL stages (evaluations and SFT), which a resumed run
    and a run from ``init_checkpoint`` have behind them. ``sft_state`` is the SFT state a
    run killed mid-SFT resumes from: its base evaluation is behind it, and the experts are
    recorded again (from the run's seed, the same episodes; the SFT checks their lengths).
    ``sft_finished``: the run was stopped after its SFT had ended (``checkpoints/sft`` is
    written), so the policy loads from that checkpoint and all that is left of the warm
    start is the after-SFT evaluation, where it is not written yet.
    """

    policy_from: str | Path | None
    record_experts: bool
    warm_start: bool
    resume_state: Mapping[str, Any] | None = None
    sft_state: Mapping[str, Any] | None = None
    sft_finished: bool = False


def plan_run(
    config: TrainConfig,
    resume: ResumePoint | None,
    sft_resume: ResumePoint | None = None,
    sft_checkpoint: Path | None = None,
) -> RunPlan:
    """The :class:`RunPlan` of ``config``, resuming from ``resume`` (an RL checkpoint),
    else ``sft_checkpoint`` (a finished SFT's), else ``sft_resume`` (an SFT state) when one
    is given.

    >>> plan_run(TrainConfig(init_checkpoint="runs/a/checkpoints/sft"), None)
    RunPlan(policy_from='runs/a/checkpoints/sft', record_experts=False, warm_start=False, resume_state=None, sft_state=None, sft_finished=False)
    >>> plan_run(TrainConfig(), None)
    RunPlan(policy_from=None, record_experts=True, warm_start=True, resume_state=None, sft_state=None, sft_finished=False)
    """
    if resume is not None:
        return RunPlan(resume.directory, False, False, resume.state)
    if config.init_checkpoint is not None:
        return RunPlan(config.init_checkpoint, False, False)
    if sft_checkpoint is not None and config.sft.enabled:
        return RunPlan(sft_checkpoint, False, True, sft_finished=True)
    if sft_resume is not None and config.sft.enabled:
        return RunPlan(sft_resume.directory, True, True, sft_state=sft_resume.state)
    return RunPlan(config.model.path, config.records_expert_episodes, True)


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
    finished_sft = run_dir / "checkpoints" / "sft"  # written whole (renamed into place)
    sft_checkpoint = (
        finished_sft if config.resume and resume is None and finished_sft.is_dir() else None
    )
    sft_resume = (  # an SFT state (GBs with AdamW's moments) is loaded only if it is used
        latest_checkpoint(run_dir / SFT_STATE)
        if config.resume and resume is None and sft_checkpoint is None
        else None
    )
    if resume is not None:
        trainer.log(f"resuming after RL step {resume.state['step']} from {resume.directory}")
    record_machine(run_dir, describe_machine(), resume.state["step"] if resume else None)
    plan = plan_run(config, resume, sft_resume, sft_checkpoint)
    if plan.sft_finished:
        trainer.log(f"resuming after the finished SFT from {plan.policy_from}")
    elif plan.sft_state is not None:
        trainer.log(f"resuming the SFT after step {plan.sft_state['step']} from {plan.policy_from}")
    experts = trainer.record_experts() if plan.record_experts else []
    if plan.policy_from is not None:
        trainer.load_policy(plan.policy_from)
    else:
        trainer.build_policy(list(corpus(experts)))
    if plan.warm_start:
        if plan.sft_state is None and not plan.sft_finished:
            trainer.evaluate("base")
        if config.sft.enabled and not plan.sft_finished:
            trainer.sft(experts, plan.sft_state)
        if not (plan.sft_finished and eval_path(run_dir, "after_sft").is_file()):
            trainer.evaluate("after_sft")
    elif skipped := [s for s in ("base", "after_sft") if s in config.eval.stages]:
        trainer.log(
            f"eval {', '.join(skipped)} skipped: this run starts after them (a checkpoint); "
            "rl.steps=0 with eval.stages=[after_rl] evaluates a checkpoint itself"
        )
    last_step = (
        config.rl.steps if stop_after_step is None else min(config.rl.steps, stop_after_step)
    )
    if config.rl.steps > 0:
        trainer.reinforce(plan.resume_state, last_step)
    if last_step == config.rl.steps:
        trainer.evaluate("after_rl")
        _diagnose(trainer)
        print_summary(trainer.console, run_dir, config.seed)
        trainer.log(f"run finished in {(time.perf_counter() - started) / 60:.1f} min: {run_dir}")
    return run_dir


def _available_tasks_only(config: TrainConfig, console: Console) -> TrainConfig:
    """``config`` without the tasks that are not registered or cannot load the train and
    eval splits here (each one said aloud, with the reason)."""
    kwargs = env_kwargs_for(config)
    names = dict.fromkeys([*config.tasks, *evaluated_tasks(config)])
    splits = ("train", config.eval.split)
    problems = {name: task_problem(name, splits, kwargs.get(name)) for name in names}
    missing = [name for name, reason in problems.items() if reason is not None]
    if not missing:
        return config
    if all(name in missing for name in config.tasks):
        raise ValueError(f"none of the configured tasks can run here: {problems}")
    for name in missing:
        console.print(f"[bold yellow]skipping task {name}: {problems[name]}[/]")
    return config.without_tasks(missing)


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
