"""Training configuration: typed dataclasses, loaded from YAML, overridden with ``key=value``.

Every knob documents itself (``metadata["help"]``) and names its source. The RL
algorithm's defaults come from :mod:`agentgym_eppo.trainer.algorithms.defaults` (the EPPO
paper's appendix A.2; verl where the paper says nothing; DAPO/DCPO/BAPO for their clip
baselines); the CPU demo (``configs/demo-cpu.yaml``) overrides what a tiny model trained
from scratch needs (a larger learning rate, short episodes, few steps).

Validation happens once, when a config is built: each section checks itself
(``__post_init__``), then :class:`TrainConfig` what spans sections. Names are looked up
in the registries of advantage estimators and clip policies, and the chosen clip policy
and the EPPO pacer are built once, so a range they refuse fails at load, not after an
hour of SFT and evaluations. The ``clip`` section's fields are the
registered clip policies' own (:class:`ClipConfig`).

One module per job: :mod:`.sections` (the run's sections: ``model``, ``sft``,
``rollout``, ``algorithm``, ``rl``, ``eval``), :mod:`.clip` (the ``clip`` section, laid
out from the registered clip policies), :mod:`.train` (:class:`TrainConfig`: the whole
run and what spans its sections, the devices and the Ray and engine sections among
them), :mod:`.loading` (YAML and ``key=value`` overrides into a config dataclass, the
pretraining's too) and :mod:`.describe` (every field with its help; the YAML dump).

>>> config = load_config(None, ["rl.steps=3", "clip.policy=fixed"])
>>> config.rl.steps, config.clip.policy
(3, 'fixed')
"""

from __future__ import annotations

from .clip import ClipConfig
from .describe import config_fields, config_to_dict, describe_config, dump_config
from .loading import (
    apply_override,
    build_config,
    config_from_dict,
    load_config,
    read_config_values,
)
from .sections import (
    EVAL_STAGES,
    PROMPTS,
    RENAMED_STAGES,
    AlgorithmConfig,
    EvalConfig,
    ModelConfig,
    RLConfig,
    RolloutConfig,
    SFTConfig,
    check_task_name,
)
from .train import TrainConfig, import_modules

__all__ = [
    "EVAL_STAGES",
    "PROMPTS",
    "RENAMED_STAGES",
    "AlgorithmConfig",
    "ClipConfig",
    "EvalConfig",
    "ModelConfig",
    "RLConfig",
    "RolloutConfig",
    "SFTConfig",
    "TrainConfig",
    "apply_override",
    "build_config",
    "check_task_name",
    "config_fields",
    "config_from_dict",
    "config_to_dict",
    "describe_config",
    "dump_config",
    "import_modules",
    "load_config",
    "read_config_values",
]
