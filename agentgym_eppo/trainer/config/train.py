"""``TrainConfig``: everything one run needs, its sections and what spans them (the
tasks and their slots, the devices, the Ray and engine sections, the modules imported
first).

>>> TrainConfig(tasks={"db": 8, "os": 16}).tasks
{'db': 8, 'os': 16}
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym_eppo.registration import ENVIRONMENTS, TASK_IDS
from agentgym_eppo.trainer.config_fields import help_field as _help
from agentgym_eppo.trainer.devices import check_bf16, check_device
from agentgym_eppo.trainer.distributed.config import EngineConfig, RayConfig, ScaleConfig

from .clip import ClipConfig
from .sections import (
    AlgorithmConfig,
    EvalConfig,
    ModelConfig,
    RLConfig,
    RolloutConfig,
    SFTConfig,
    check_task_name,
)


@dataclass
class TrainConfig:
    """Everything ``agentgym-eppo train`` needs (see ``configs/demo-cpu.yaml``)."""

    seed: int = _help("Seeds model init, sampling, task draws. Default: ours.", 0)
    output_dir: str = _help(
        "Run directory (metrics, checkpoints, evals, plots). Default: ours.", "runs/eppo"
    )
    init_checkpoint: str | None = _help(
        "Start RL from this saved checkpoint (e.g. RUN_DIR/checkpoints/sft); skips building "
        "and SFT. Default: unset (build, or load model.path, then SFT).",
        None,
    )
    resume: bool = _help(
        "Continue the run in output_dir from its latest RL checkpoint, exactly. Default: off.",
        False,
    )
    tasks: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(TASK_IDS, 8),
        metadata={
            "help": "task_id (or env id) -> rollout slots, a multiple of rollout.group_size. "
            "Default: AgentBench's five tasks, one group of the paper's 8 rollouts each."
        },
    )
    skip_unavailable_tasks: bool = _help(
        "Drop (with a message) tasks whose environment is not registered in this install, "
        "instead of failing; the demo uses it to run on whichever tasks exist. Default: off.",
        False,
    )
    env_kwargs: dict[str, dict[str, Any]] = field(
        default_factory=dict,
        metadata={"help": "Constructor keywords per task. Default: unset (each task's own)."},
    )
    threads: int | None = _help(
        "torch.set_num_threads for the trainer. Default: unset (torch's own).", None
    )
    device: str = _help(
        "Where the policy runs: auto (cuda when available) | cpu | cuda. Default: ours.", "auto"
    )
    bf16: bool | str = _help(
        "bf16 autocast: auto (where device is a GPU, or a CPU with avx512_bf16/AMX whose kernels run at "
        "AVX-512, not held to AVX2) | true | false. "
        "Default: ours (the paper trains in bf16 on GPUs).",
        "auto",
    )
    tensorboard: bool = _help("Also write TensorBoard event files. Default: ours.", True)
    progress: bool = _help("Show a rich progress bar. Default: ours.", True)
    imports: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Modules imported before the rest of the config is read: where user code "
            "registers its clip policies, advantage estimators or tasks "
            "(register_clip_policy, register_task), so that the config, compare and every "
            "process of the run know them. Default: unset."
        },
    )
    model: ModelConfig = field(default_factory=ModelConfig, metadata={"help": "The policy."})
    sft: SFTConfig = field(default_factory=SFTConfig, metadata={"help": "Expert warm start."})
    rollout: RolloutConfig = field(default_factory=RolloutConfig, metadata={"help": "Rollouts."})
    algorithm: AlgorithmConfig = field(
        default_factory=AlgorithmConfig, metadata={"help": "Advantages and loss."}
    )
    clip: ClipConfig = field(default_factory=ClipConfig, metadata={"help": "Clip policy."})
    rl: RLConfig = field(default_factory=RLConfig, metadata={"help": "RL loop."})
    eval: EvalConfig = field(default_factory=EvalConfig, metadata={"help": "Evaluation."})
    ray: RayConfig = field(
        default_factory=RayConfig,
        metadata={"help": "Ray cluster (None: one process; ray.address=auto joins a cluster)."},
    )
    engine: EngineConfig = field(
        default_factory=EngineConfig,
        metadata={"help": "RL rollout engine: hf | sglang | sglang-server (docs/scaling.md)."},
    )

    def __post_init__(self) -> None:
        """Raise ``ValueError`` naming the field of any inconsistent setting, once, when the
        config is built and before anything expensive. Each section checked itself when it
        was built (the chosen clip policy and the EPPO pacer, whose metrics run under
        every policy, among them); here: the Ray and engine sections together, the
        devices, and the settings that span sections."""
        import_modules(self.imports)
        ScaleConfig(self.ray, self.engine).validate()
        check_bf16(self.bf16)
        check_device(self.device)
        if not self.tasks:
            raise ValueError("tasks must name at least one task")
        for task_id, slots in self.tasks.items():
            check_task_name(task_id, "tasks")
            if slots < 1 or slots % self.rollout.group_size:
                raise ValueError(
                    f"tasks.{task_id} = {slots} slots must be a positive multiple of "
                    f"rollout.group_size ({self.rollout.group_size})"
                )
        without = [t for t in self.tasks if t in ENVIRONMENTS and not ENVIRONMENTS[t].expert]
        if without and self.records_expert_episodes:
            raise ValueError(
                f"tasks {without} register no expert, and this run records expert episodes "
                "(for the SFT, and for the tokenizer it builds); start from a model "
                "(model.path with sft.enabled=false) or a checkpoint (init_checkpoint)"
            )

    @property
    def records_expert_episodes(self) -> bool:
        """Whether a fresh run (not a resumed one) plays every task's expert first: for
        the SFT, or for the tokenizer a built model needs."""
        return self.init_checkpoint is None and (self.model.path is None or self.sft.enabled)

    def without_tasks(self, names: Sequence[str]) -> TrainConfig:
        """A copy without the tasks ``names``, in ``tasks`` and ``eval.tasks``, and without
        their per-task settings (which would name a task the run lacks); built, and so
        checked, like any config.

        >>> config = TrainConfig(
        ...     tasks={"db": 8, "os": 8},
        ...     eval=EvalConfig(tasks=["db", "os"], instances_by_task={"os": 2}),
        ... )
        >>> trimmed = config.without_tasks(["os"])
        >>> trimmed.tasks, trimmed.eval.tasks, trimmed.eval.instances_by_task
        ({'db': 8}, ['db'], {})
        >>> config.tasks
        {'db': 8, 'os': 8}
        >>> config.without_tasks(["db", "os"])
        Traceback (most recent call last):
        ...
        ValueError: eval.tasks must name at least one task (or be null: the trained ones)
        """

        def kept(per_task: dict[str, Any]) -> dict[str, Any]:
            return {name: value for name, value in per_task.items() if name not in names}

        copied = copy.deepcopy(self)
        evaluated = copied.eval.tasks
        return dataclasses.replace(
            copied,
            tasks=kept(copied.tasks),
            sft=dataclasses.replace(copied.sft, episodes_by_task=kept(copied.sft.episodes_by_task)),
            eval=dataclasses.replace(
                copied.eval,
                tasks=None if evaluated is None else [t for t in evaluated if t not in names],
                instances_by_task=kept(copied.eval.instances_by_task),
            ),
        )


def import_modules(modules: Sequence[str], where: str = "imports") -> None:
    """Import each module (``imports``): its registrations run before anything names them."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ValueError(f"{where}: cannot import {module!r} ({error})") from None
