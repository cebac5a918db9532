"""``agentgym-eppo compare CONFIG``: several training methods x several seeds, one report.

The comparison config (``configs/compare-cpu.yaml``) names a base training config, the
seeds, and one set of ``key=value`` overrides per method. Every run starts RL from one
shared checkpoint (a named one such as the shipped base model, or an SFT checkpoint
trained once here), so methods differ only in what they are meant to differ in. A named
start is evaluated once with the protocol (``OUT/start``): the point every method starts
from. For each method and seed, in order (the ``headline`` pair's seeds first, then the
other methods seed by seed):

1. skip the run if ``OUT/runs/<method>/seed<k>/finished.json`` exists, or its export in
   ``RESULTS`` holds its final evaluation (resumable: kill the process at any time and
   start it again, here or on a fresh checkout that carries the exports);
2. otherwise ``run_training(config)`` with ``seed=k``, ``output_dir=OUT/runs/<method>/seed<k>``
   and ``resume=true``, so an interrupted run continues from its last RL checkpoint
   (the trainer writes the run's own diagnostics and plots);
3. copy the run's small files (config, metrics, evaluations, diagnostics) to
   ``RESULTS/<method>/seed<k>/`` when the config names a ``results_dir``, so the report
   can be rebuilt from the repository alone;
4. rewrite the report (so a partial comparison can be read at any time; the report
   counts finished runs and says PARTIAL).

With ``confirm_split``, each headline run's final checkpoint is evaluated once on that
split with the same protocol (``RESULTS/<method>/seed<k>/confirm-<split>/``) as the last
part of the run, before it counts as finished (checkpoints stay on the machine that
trained them; the exports travel), and the report gives these evaluations their own
section. ``--confirm-only`` evaluates the headline runs finished here without one, beside
a comparison still training.

With ``parallel_runs: N`` in the config, up to N runs train at once, each in its own
process (``torch_threads`` threads each): on a 2-core machine two one-thread runs finish
the comparison in about half the time of one after the other.

A failing run is recorded in ``OUT/runs/<method>/seed<k>/failed.txt`` and in the report,
and the comparison goes on with the next one. ``OUT/compare.lock`` keeps two comparisons
from writing one folder at once. ``python -m agentgym_eppo.trainer.compare CONFIG
--report-only`` rebuilds the report from whatever has finished, without training (safe
while a comparison is running).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import sys
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentgym_eppo.core.processes import pid_alive
from agentgym_eppo.core.tasks import SPLITS
from agentgym_eppo.trainer.analysis.compare_collect import (
    CONFIRM_STAGE,
    Confirmation,
    SeedResult,
    collect_confirmation,
    collect_seed,
)
from agentgym_eppo.trainer.analysis.compare_report import write_compare_report
from agentgym_eppo.trainer.analysis.run_dir import eval_path, eval_success, read_evals
from agentgym_eppo.trainer.training.checkpoint import latest_checkpoint

FINISHED = "finished.json"
SFT_CHECKPOINT = "checkpoints/sft"
"""Where the trainer saves the SFT model inside its run directory."""
FAILED = "failed.txt"
LOCK = "compare.lock"
CONFIRM_LOCK = "confirm.lock"
START = "start"
"""The folder (in ``output_dir`` and ``results_dir``) of the named start's evaluation."""
EXPORTED = ("config.yaml", "machine.jsonl", "metrics.jsonl", "diagnostics.md", "eval_*.json")
"""What :func:`export_run` copies from a finished run to ``results_dir``."""
_METHOD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class CompareConfig:
    """What ``configs/compare-*.yaml`` holds. Relative paths are relative to the working directory.

    Keys: ``output_dir``; ``base_config`` (the trainer's YAML every run starts from);
    ``seeds``; ``overrides`` (``key: value`` applied to every run, SFT included);
    ``methods`` (name -> overrides of that method); ``sft`` with ``checkpoint`` (an existing
    SFT checkpoint, or null to train one here) and ``overrides`` (applied to that SFT run);
    ``torch_threads`` (default 1, so a background comparison leaves the machine usable);
    ``parallel_runs`` (default 1: runs one after the other; N: up to N processes at once);
    ``seeds_by_method`` (method -> its own seeds, in place of ``seeds``); ``headline``
    (the methods whose runs go first: the pair the comparison is mainly about);
    ``results_dir`` (where finished runs' small files and the report go; default
    ``output_dir``); ``confirm_split`` (a split, e.g. ``test``, on which each headline
    run's final checkpoint is evaluated once with the same protocol, after training);
    ``extends`` (another comparison config, relative to this file, whose keys this one
    replaces, ``overrides`` key by key: a variant names only what it changes).
    """

    output_dir: Path
    base_config: Path
    seeds: tuple[int, ...]
    methods: dict[str, dict[str, Any]]
    overrides: dict[str, Any] = field(default_factory=dict)
    sft_checkpoint: Path | None = None
    sft_overrides: dict[str, Any] = field(default_factory=dict)
    torch_threads: int = 1
    parallel_runs: int = 1
    seeds_by_method: dict[str, tuple[int, ...]] = field(default_factory=dict)
    headline: tuple[str, ...] = ()
    results_dir: Path | None = None
    confirm_split: str | None = None

    def method_seeds(self, method: str) -> tuple[int, ...]:
        """The seeds ``method`` runs with."""
        return self.seeds_by_method.get(method, self.seeds)

    @property
    def report_dir(self) -> Path:
        """Where the report and the exported runs go."""
        return self.results_dir if self.results_dir is not None else self.output_dir

    def exported_slot(self, method: str, seed: int) -> Path:
        """The folder of one finished run's exported files."""
        return self.report_dir / method / f"seed{seed}"

    @property
    def runs_dir(self) -> Path:
        return self.output_dir / "runs"

    @property
    def sft_slot(self) -> Path:
        """The folder of the shared SFT run (when the config names no checkpoint)."""
        return self.output_dir / "sft"

    def run_slot(self, method: str, seed: int) -> Path:
        """The folder of one (method, seed) run: the trainer's ``output_dir``."""
        return self.runs_dir / method / f"seed{seed}"


_KEYS = {
    "output_dir",
    "base_config",
    "seeds",
    "methods",
    "overrides",
    "sft",
    "torch_threads",
    "parallel_runs",
    "seeds_by_method",
    "headline",
    "results_dir",
    "confirm_split",
    "extends",
}


def load_compare_config(path: str | Path) -> CompareConfig:
    """Parse and check a comparison config; errors name the key and what is expected."""
    source = Path(path)
    raw = _read_extended(source, ())
    for key in ("output_dir", "base_config", "seeds", "methods"):
        if key not in raw:
            raise ValueError(f"{source}: missing required key {key!r}")
    seeds = _check_seeds(source, "seeds", raw["seeds"])
    methods = raw["methods"]
    if not isinstance(methods, dict) or not methods:
        raise ValueError(f"{source}: 'methods' must map method names to overrides")
    for name, overrides in methods.items():
        if not isinstance(name, str) or not _METHOD_NAME.match(name):
            raise ValueError(f"{source}: method name {name!r} must be a plain folder name")
        _check_overrides(source, f"methods.{name}", overrides)
    by_method = raw.get("seeds_by_method") or {}
    if not isinstance(by_method, dict):
        raise ValueError(f"{source}: 'seeds_by_method' must map method names to seed lists")
    headline = raw.get("headline") or []
    if not isinstance(headline, list):
        raise ValueError(f"{source}: 'headline' must be a list of method names, got {headline!r}")
    for where, names in (("seeds_by_method", list(by_method)), ("headline", headline)):
        unknown_methods = [name for name in names if name not in methods]
        if unknown_methods:
            raise ValueError(
                f"{source}: {where!r} names {unknown_methods}, not among the methods "
                f"{sorted(methods)}"
            )
    sft = raw.get("sft") or {}
    if not isinstance(sft, dict) or set(sft) - {"checkpoint", "overrides"}:
        raise ValueError(f"{source}: 'sft' takes 'checkpoint' and 'overrides', got {sft!r}")
    _check_overrides(source, "overrides", raw.get("overrides"))
    _check_overrides(source, "sft.overrides", sft.get("overrides"))
    threads = raw.get("torch_threads", 1)
    if type(threads) is not int or threads < 1:
        raise ValueError(f"{source}: 'torch_threads' must be a positive integer, got {threads!r}")
    parallel = raw.get("parallel_runs", 1)
    if type(parallel) is not int or parallel < 1:
        raise ValueError(f"{source}: 'parallel_runs' must be a positive integer, got {parallel!r}")
    return CompareConfig(
        output_dir=Path(raw["output_dir"]),
        base_config=Path(raw["base_config"]),
        seeds=tuple(seeds),
        methods={name: dict(overrides or {}) for name, overrides in methods.items()},
        overrides=dict(raw.get("overrides") or {}),
        sft_checkpoint=Path(sft["checkpoint"]) if sft.get("checkpoint") else None,
        sft_overrides=dict(sft.get("overrides") or {}),
        torch_threads=threads,
        parallel_runs=parallel,
        seeds_by_method={
            name: _check_seeds(source, f"seeds_by_method.{name}", value)
            for name, value in by_method.items()
        },
        headline=tuple(headline),
        results_dir=Path(raw["results_dir"]) if raw.get("results_dir") else None,
        confirm_split=_check_confirm_split(source, raw.get("confirm_split"), headline),
    )


def _read_extended(source: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    """``source``'s keys over those of the config it ``extends`` (``overrides`` merged key
    by key), followed to the root; a config that extends itself, directly or not, is refused."""
    if not source.is_file():
        raise FileNotFoundError(f"comparison config {source} does not exist")
    raw = yaml.safe_load(source.read_text(encoding="utf-8"))
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: expected a mapping of {sorted(_KEYS)}")
    unknown = set(raw) - _KEYS
    if unknown:
        raise ValueError(f"{source}: unknown key(s) {sorted(unknown)}; expected {sorted(_KEYS)}")
    parent_name = raw.pop("extends", None)
    if parent_name is None:
        return raw
    parent = (source.parent / str(parent_name)).resolve()
    if parent in chain or parent == source.resolve():
        raise ValueError(f"{source}: 'extends' makes a cycle through {parent}")
    merged = _read_extended(parent, (*chain, source.resolve()))
    _check_overrides(source, "overrides", raw.get("overrides"))
    overrides = {**(merged.get("overrides") or {}), **(raw.get("overrides") or {})}
    return {**merged, **raw, "overrides": overrides}


def _check_confirm_split(source: Path, split: Any, headline: Sequence[str]) -> str | None:
    if split is None:
        return None
    if split not in SPLITS:
        raise ValueError(f"{source}: 'confirm_split' must be one of {list(SPLITS)}, got {split!r}")
    if not headline:
        raise ValueError(f"{source}: 'confirm_split' confirms the headline runs: name 'headline'")
    return str(split)


def _check_seeds(source: Path, where: str, seeds: Any) -> tuple[int, ...]:
    if not isinstance(seeds, list) or not seeds or not all(type(s) is int for s in seeds):
        raise ValueError(f"{source}: {where!r} must be a non-empty list of integers, got {seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{source}: {where!r} repeats a seed: {seeds!r}")
    return tuple(seeds)


def _check_overrides(source: Path, where: str, overrides: Any) -> None:
    if overrides is None:
        return
    if not isinstance(overrides, dict) or not all(isinstance(k, str) for k in overrides):
        raise ValueError(f"{source}: {where!r} must map dotted config keys to values")


def planned_runs(config: CompareConfig) -> list[tuple[str, int]]:
    """Every (method, seed) in run order: the headline methods' runs first, then the
    others seed by seed, so early results answer the main question and cover all methods.
    """

    def seed_by_seed(methods: Sequence[str]) -> list[tuple[str, int]]:
        rounds = max((len(config.method_seeds(m)) for m in methods), default=0)
        return [
            (method, config.method_seeds(method)[k])
            for k in range(rounds)
            for method in methods
            if k < len(config.method_seeds(method))
        ]

    rest = [method for method in config.methods if method not in config.headline]
    return seed_by_seed(config.headline) + seed_by_seed(rest)


def is_finished(config: CompareConfig, method: str, seed: int) -> bool:
    """Trained here (the marker), or exported with its final evaluation (trained elsewhere)."""
    return (config.run_slot(method, seed) / FINISHED).is_file() or _exported_eval(
        config, method, seed
    )


def _exported_eval(config: CompareConfig, method: str, seed: int) -> bool:
    return (
        config.results_dir is not None
        and (config.exported_slot(method, seed) / "eval_after_rl.json").is_file()
    )


def _finished_run_dir(config: CompareConfig, method: str, seed: int) -> Path:
    marker = json.loads((config.run_slot(method, seed) / FINISHED).read_text())
    return Path(marker["run_dir"])


def _as_override_args(overrides: Mapping[str, Any]) -> list[str]:
    """``{"rl.steps": 4}`` -> ``["rl.steps=4"]``: the trainer's ``key=value`` form (YAML values)."""
    args = []
    for key, value in overrides.items():
        text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False).strip()
        args.append(f"{key}={text.removesuffix('...').strip()}")
    return args


def _train(base_config: Path, overrides: Mapping[str, Any]) -> Path:
    """Build the trainer's config from the base YAML plus overrides and train; the run dir."""
    from .config import load_config
    from .run import run_training

    return Path(run_training(load_config(base_config, _as_override_args(overrides))))


def ensure_sft_checkpoint(config: CompareConfig) -> Path:
    """The shared start checkpoint: the configured one (a folder or a named model, which
    :func:`ensure_start_evaluated` evaluates once), or an SFT checkpoint trained once
    into ``OUT/sft``.

    The SFT run stops before RL (``rl.steps=0``) and evaluates only ``after_sft``: that
    evaluation is the common starting point of every method, so the RL runs skip it.
    """
    if config.sft_checkpoint is not None:
        from .training.models import resolve_model_path

        checkpoint = Path(resolve_model_path(config.sft_checkpoint))
        if not checkpoint.exists():
            raise FileNotFoundError(f"sft.checkpoint {config.sft_checkpoint} does not exist")
        return checkpoint
    slot = config.sft_slot
    marker = slot / FINISHED
    if marker.is_file():
        return Path(json.loads(marker.read_text())["checkpoint"])
    _clear(slot)
    print(f"[compare] training the shared SFT checkpoint into {slot}", flush=True)
    overrides = {
        **config.overrides,
        "threads": config.torch_threads,
        **config.sft_overrides,
        "output_dir": str(slot),
        "rl.steps": 0,
        "eval.stages": ["after_sft"],
    }
    run_dir = _train(config.base_config, overrides)
    checkpoint = run_dir / SFT_CHECKPOINT
    if not checkpoint.exists():
        raise FileNotFoundError(f"the SFT run left no checkpoint at {checkpoint}")
    marker.write_text(json.dumps({"run_dir": str(run_dir), "checkpoint": str(checkpoint)}))
    return checkpoint


def ensure_start_evaluated(config: CompareConfig, checkpoint: Path) -> None:
    """Evaluate a configured start checkpoint once with the protocol into ``OUT/start``
    (exported to ``RESULTS/start``); an SFT start trained here was evaluated by its own run."""
    if config.sft_checkpoint is not None:
        _evaluate_once(config, checkpoint, config.output_dir / START, config.report_dir / START)


def _evaluate_once(
    config: CompareConfig, checkpoint: Path, slot: Path, export_to: Path, split: str | None = None
) -> None:
    """The protocol's evaluation of ``checkpoint`` (``base`` of a run that loads it
    and stops before RL, so every setting of the comparison applies), once: into ``slot``,
    its files copied to ``export_to``; ``split`` in place of the protocol's own. Done
    already when ``slot`` is marked finished or ``export_to`` holds the evaluation."""
    if (slot / FINISHED).is_file() or eval_path(export_to, CONFIRM_STAGE).is_file():
        return
    _clear(slot)
    print(f"[compare] evaluating {checkpoint} into {slot}", flush=True)
    overrides = {
        **config.overrides,
        "threads": config.torch_threads,
        "output_dir": str(slot),
        "model.path": str(checkpoint),
        "sft.enabled": False,
        "rl.steps": 0,
        "eval.stages": [CONFIRM_STAGE],
        **({"eval.split": split} if split else {}),
    }
    run_dir = _train(config.base_config, overrides)
    export_run(run_dir, export_to)
    (slot / FINISHED).write_text(json.dumps({"run_dir": str(run_dir)}))


def confirm_slot(config: CompareConfig, method: str, seed: int) -> Path:
    """The folder of one headline run's evaluation on ``confirm_split``."""
    return config.output_dir / f"confirm-{config.confirm_split}" / method / f"seed{seed}"


def confirmed_dir(config: CompareConfig, method: str, seed: int) -> Path:
    """Where that evaluation's files are exported (beside the run's own)."""
    return config.exported_slot(method, seed) / f"confirm-{config.confirm_split}"


def confirm_run(config: CompareConfig, method: str, seed: int, run_dir: Path) -> None:
    """Evaluate a headline run's final checkpoint on ``confirm_split``, once."""
    resume = latest_checkpoint(run_dir / "checkpoints")
    if resume is None:
        raise FileNotFoundError(f"{method}/seed{seed}: the finished run left no checkpoint")
    _evaluate_once(
        config,
        resume.directory,
        confirm_slot(config, method, seed),
        confirmed_dir(config, method, seed),
        split=config.confirm_split,
    )


def confirm_headline(config: CompareConfig) -> list[tuple[str, int]]:
    """Evaluate on ``confirm_split`` every headline run finished here without that
    evaluation, once each (resumable like the runs); return the headline runs it cannot
    confirm: those still training and those trained on another machine (their
    checkpoints did not travel).

    It writes only its own folders, so it may run beside a comparison still training
    (``--confirm-only``)."""
    left = []
    for method, seed in planned_runs(config):
        if method not in config.headline or config.confirm_split is None:
            continue
        if eval_path(confirmed_dir(config, method, seed), CONFIRM_STAGE).is_file():
            continue
        if not (config.run_slot(method, seed) / FINISHED).is_file():
            left.append((method, seed))
            continue
        confirm_run(config, method, seed, _finished_run_dir(config, method, seed))
    return left


def export_run(run_dir: Path, into: Path) -> None:
    """Copy a finished run's small files (:data:`EXPORTED`: no checkpoints) to ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    for pattern in EXPORTED:
        for path in sorted(run_dir.glob(pattern)):
            shutil.copy2(path, into / path.name)


def _clear(slot: Path) -> None:
    """Remove what an interrupted SFT run or evaluation left (neither resumes); only our
    own folder."""
    if slot.exists():
        print(f"[compare] removing the unfinished SFT run in {slot}", flush=True)
        shutil.rmtree(slot)


def run_one(config: CompareConfig, method: str, seed: int, sft_checkpoint: Path) -> Path:
    """Train one (method, seed) run from the shared checkpoint and mark it finished.

    The trainer is asked to ``resume``: a run interrupted after an RL checkpoint continues
    exactly from it, one interrupted earlier starts afresh. Only ``after_rl`` is evaluated
    (the start, ``after_sft``, is the shared checkpoint's); the trainer writes the run's
    diagnostics and plots itself.
    """
    slot = config.run_slot(method, seed)
    (slot / FAILED).unlink(missing_ok=True)
    overrides = {
        **config.overrides,
        "threads": config.torch_threads,
        **config.methods[method],
        "seed": seed,
        "output_dir": str(slot),
        "init_checkpoint": str(sft_checkpoint),
        "resume": True,
        "eval.stages": ["after_rl"],
    }
    started = time.monotonic()
    run_dir = _train(config.base_config, overrides)
    if method in config.headline and config.confirm_split is not None:
        confirm_run(config, method, seed, run_dir)  # before the export that marks it done
    if config.results_dir is not None:
        export_run(run_dir, config.exported_slot(method, seed))
    (slot / FINISHED).write_text(
        json.dumps({"run_dir": str(run_dir), "seconds": round(time.monotonic() - started, 1)})
    )
    return run_dir


@contextmanager
def _lock(output_dir: Path, name: str = LOCK) -> Iterator[None]:
    """Hold ``OUT/<name>`` (our PID); refuse when a live process holds it."""
    output_dir.mkdir(parents=True, exist_ok=True)
    lock = output_dir / name
    if lock.is_file():
        holder = int(lock.read_text().strip() or 0)
        if holder and pid_alive(holder):
            raise RuntimeError(
                f"another comparison (pid {holder}) is writing {output_dir}; wait for it, "
                f"or use --report-only to read the results so far"
            )
    lock.write_text(str(os.getpid()))
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def _start_success(config: CompareConfig) -> dict[str, float] | None:
    """Dev success of the shared start: its exported evaluation, or the SFT run made here."""
    start = config.report_dir / START
    if eval_path(start, CONFIRM_STAGE).is_file():
        return eval_success(read_evals(start)[CONFIRM_STAGE])
    marker = config.sft_slot / FINISHED
    if not marker.is_file():
        return None
    evals = read_evals(Path(json.loads(marker.read_text())["run_dir"]))
    return eval_success(evals["after_sft"]) if "after_sft" in evals else None


def _result_dir(config: CompareConfig, method: str, seed: int) -> Path | None:
    """Where a finished run's files are read from: its export, else its run directory."""
    exported = config.exported_slot(method, seed)
    if config.results_dir is not None and (exported / "eval_after_rl.json").is_file():
        return exported
    if is_finished(config, method, seed):
        return _finished_run_dir(config, method, seed)
    return None


def collect_confirmations(config: CompareConfig) -> Confirmation | None:
    """The headline runs' evaluations on ``confirm_split`` found exported, and why each
    other planned headline run has none (``None`` without a ``confirm_split``)."""
    if config.confirm_split is None:
        return None
    results: dict[str, list[SeedResult]] = {method: [] for method in config.headline}
    missing: dict[str, dict[int, str]] = {method: {} for method in config.headline}
    for method, seed in planned_runs(config):
        if method not in config.headline:
            continue
        found = confirmed_dir(config, method, seed)
        if eval_path(found, CONFIRM_STAGE).is_file():
            results[method].append(collect_confirmation(seed, found, config.confirm_split))
        else:
            missing[method][seed] = _why_unconfirmed(config, method, seed)
    return Confirmation(config.confirm_split, results, missing)


def _why_unconfirmed(config: CompareConfig, method: str, seed: int) -> str:
    """Why a headline run has no confirmation: still training, trained here and not
    confirmed yet, or trained on another machine (only its exports travelled)."""
    if not is_finished(config, method, seed):
        return "not finished yet"
    if config.run_slot(method, seed).is_dir():
        return "trained here, not confirmed yet"
    return (
        "trained on another machine, whose checkpoints did not travel with the exported "
        "files: nothing is left to evaluate"
    )


def write_report(config: CompareConfig) -> Path:
    """Rebuild the report from every finished run (and list the failed ones); with a
    ``results_dir`` it needs only the exported files, so it rebuilds from a checkout."""
    results: dict[str, list[SeedResult]] = {method: [] for method in config.methods}
    failures: dict[str, str] = {}
    for method, seed in planned_runs(config):
        slot = config.run_slot(method, seed)
        found = _result_dir(config, method, seed)
        if found is not None:
            results[method].append(collect_seed(seed, found))
        elif (slot / FAILED).is_file():
            failures[f"{method}/seed{seed}"] = (slot / FAILED).read_text().strip().splitlines()[-1]
    for seeds in results.values():
        seeds.sort(key=lambda result: result.seed)
    return write_compare_report(
        config.report_dir,
        results,
        planned_seeds={method: config.method_seeds(method) for method in config.methods},
        start_success=_start_success(config),
        start_name=str(config.sft_checkpoint or "the SFT checkpoint trained for the comparison"),
        failures=failures,
        confirmation=collect_confirmations(config),
    )


def run_recorded(config: CompareConfig, method: str, seed: int, sft_checkpoint: Path) -> str:
    """:func:`run_one`, with a failure written to the run's ``failed.txt`` instead of
    raised (one failed run must not stop the others); returns what to print."""
    print(f"[compare] {method} seed {seed}: training", flush=True)
    try:
        run_dir = run_one(config, method, seed, sft_checkpoint)
    except Exception as error:
        slot = config.run_slot(method, seed)
        slot.mkdir(parents=True, exist_ok=True)
        (slot / FAILED).write_text(traceback.format_exc())
        return f"FAILED ({error})"
    return f"finished in {run_dir}"


def _announce(method: str, seed: int, outcome: str) -> None:
    print(f"[compare] {method} seed {seed}: {outcome}", flush=True)


def _run_in_processes(
    config: CompareConfig, todo: Sequence[tuple[str, int]], sft_checkpoint: Path
) -> None:
    """Train ``todo`` in up to ``parallel_runs`` spawned processes; rewrite the report as
    each run ends. A worker process that dies (killed, out of memory) breaks the pool: its
    run and those not yet finished are marked failed, and the next start retries them."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=config.parallel_runs, mp_context=context) as pool:
        pending = {
            pool.submit(run_recorded, config, method, seed, sft_checkpoint): (method, seed)
            for method, seed in todo
        }
        for future in as_completed(pending):
            method, seed = pending[future]
            try:
                outcome = future.result()
            except Exception as error:  # the worker process itself died
                slot = config.run_slot(method, seed)
                slot.mkdir(parents=True, exist_ok=True)
                (slot / FAILED).write_text(f"the run's process died: {error!r}\n")
                outcome = f"FAILED (process died: {error!r})"
            _announce(method, seed, outcome)
            write_report(config)


def run_compare(
    config_path: str | Path, *, report_only: bool = False, confirm_only: bool = False
) -> Path:
    """Run every unfinished (method, seed) of the comparison, then the headline runs'
    evaluations on ``confirm_split``, and write the report.

    Returns the report's path. With ``report_only`` nothing is trained: the report is
    rebuilt from the runs finished so far. With ``confirm_only`` only the confirmations
    of the headline runs finished so far run (beside a comparison still training).
    """
    config = load_compare_config(config_path)
    if report_only:
        return write_report(config)
    import torch

    torch.set_num_threads(config.torch_threads)
    if confirm_only:
        with _lock(config.output_dir, CONFIRM_LOCK):
            left = confirm_headline(config)
        print(
            f"[compare] confirmations done; {len(left)} headline runs not confirmable here "
            "(still training, or trained on another machine)"
        )
        return config.report_dir / "report.md"
    with _lock(config.output_dir):
        sft_checkpoint = ensure_sft_checkpoint(config)
        ensure_start_evaluated(config, sft_checkpoint)
        todo = [run for run in planned_runs(config) if not is_finished(config, *run)]
        print(f"[compare] {len(todo)} of {len(planned_runs(config))} runs to go", flush=True)
        report = write_report(config)
        if config.parallel_runs == 1:
            for method, seed in todo:
                _announce(method, seed, run_recorded(config, method, seed, sft_checkpoint))
                report = write_report(config)
        else:
            _run_in_processes(config, todo, sft_checkpoint)
        with _lock(config.output_dir, CONFIRM_LOCK):
            confirm_headline(config)
        report = write_report(config)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentgym_eppo.trainer.compare", description=__doc__.split("\n")[0]
    )
    parser.add_argument("config", help="comparison config, e.g. configs/compare-cpu.yaml")
    parser.add_argument(
        "--report-only", action="store_true", help="rebuild the report from finished runs only"
    )
    parser.add_argument(
        "--confirm-only",
        action="store_true",
        help="only evaluate the finished headline runs on confirm_split (beside a running grid)",
    )
    args = parser.parse_args(argv)
    print(run_compare(args.config, report_only=args.report_only, confirm_only=args.confirm_only))
    return 0


if __name__ == "__main__":
    sys.exit(main())
