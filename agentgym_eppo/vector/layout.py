"""Which sub-env each slot runs: from ``{task: slots}`` or a list of env ids.

With a mapping, groups of ``group_size`` slots of the tasks alternate round-robin
(``{"db": 4, "kg": 4}`` with G=2 gives db db kg kg db db kg kg), so a prefix of the
slots is as mixed as the whole. A list gives one slot per entry, in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentgym_eppo.registration import ENVIRONMENTS, env_id_for

from .host import SubEnvSpec

SlotsSpec = Mapping[str, int] | Sequence[str | tuple[str, Mapping[str, Any]] | SubEnvSpec]


def resolve_env_id(name: str) -> str:
    """A task id (``"db"``) becomes its Gymnasium id; anything else is taken as an id."""
    return env_id_for(name) if name in ENVIRONMENTS else name


def slot_specs(
    tasks: SlotsSpec,
    group_size: int,
    split: str,
    env_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[SubEnvSpec]:
    """One :class:`SubEnvSpec` per slot; ``split`` and ``env_kwargs[name]`` go to each env."""
    if group_size < 1:
        raise ValueError(f"group_size must be at least 1, got {group_size}")
    env_kwargs = dict(env_kwargs or {})
    if isinstance(tasks, Mapping):
        names = _interleave_groups(tasks, group_size)
        entries: list[tuple[str, Mapping[str, Any]]] = [(n, env_kwargs.get(n, {})) for n in names]
        specs = [SubEnvSpec(resolve_env_id(n), {"split": split, **kw}) for n, kw in entries]
    else:
        specs = [_entry_spec(entry, split, env_kwargs) for entry in tasks]
    if not specs:
        raise ValueError("MultiTaskVectorEnv needs at least one slot")
    if len(specs) % group_size:
        raise ValueError(
            f"{len(specs)} slots do not split into groups of {group_size}; "
            "give a number of slots that group_size divides"
        )
    for start in range(0, len(specs), group_size):
        group = specs[start : start + group_size]
        if any(spec != group[0] for spec in group):
            raise ValueError(
                f"slots {start}..{start + group_size - 1} form one group but run different "
                f"envs ({', '.join(sorted({s.name for s in group}))}); a group shares one task"
            )
    return specs


def _interleave_groups(tasks: Mapping[str, int], group_size: int) -> list[str]:
    groups_left: dict[str, int] = {}
    for name, count in tasks.items():
        if not isinstance(count, int) or count < 0:
            raise ValueError(
                f"the number of slots for {name!r} must be a non-negative int, got {count!r}"
            )
        if count % group_size:
            raise ValueError(
                f"{name!r} has {count} slots, not a multiple of group_size={group_size}"
            )
        groups_left[name] = count // group_size
    names: list[str] = []
    while any(groups_left.values()):
        for name in tasks:
            if groups_left[name]:
                names.extend([name] * group_size)
                groups_left[name] -= 1
    return names


def _entry_spec(
    entry: str | tuple[str, Mapping[str, Any]] | SubEnvSpec,
    split: str,
    env_kwargs: Mapping[str, Mapping[str, Any]],
) -> SubEnvSpec:
    if isinstance(entry, SubEnvSpec):
        return entry
    if isinstance(entry, str):
        return SubEnvSpec(resolve_env_id(entry), {"split": split, **env_kwargs.get(entry, {})})
    if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str):
        name, kwargs = entry
        return SubEnvSpec(
            resolve_env_id(name), {"split": split, **env_kwargs.get(name, {}), **kwargs}
        )
    raise TypeError(f"a slot is an env id, an (env_id, kwargs) pair or a SubEnvSpec, got {entry!r}")
