"""MultiTaskVectorEnv and its worker back-ends (serial, subprocess, Ray)."""

from .env import MultiTaskVectorEnv
from .host import EXPERT_ACTION, SubEnvSpec
from .outcome import StepOutcome
from .sampling import InstanceStream, interleaved_schedule
from .workers import BACKENDS, WorkerError

__all__ = [
    "BACKENDS",
    "EXPERT_ACTION",
    "InstanceStream",
    "MultiTaskVectorEnv",
    "StepOutcome",
    "SubEnvSpec",
    "WorkerError",
    "interleaved_schedule",
]
