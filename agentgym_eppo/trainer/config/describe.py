"""Showing a config: every field with its value, default and help
(``agentgym-eppo train --show-config``), and the resolved config as YAML
(``RUN_DIR/config.yaml``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from .train import TrainConfig


def config_fields(
    cls: Any = None, prefix: str = ""
) -> list[tuple[str, dataclasses.Field[Any], Any]]:
    """``(dotted name, field, default)`` of every leaf field of ``cls`` (a config section,
    default :class:`TrainConfig`), sections opened in declaration order."""
    rows: list[tuple[str, dataclasses.Field[Any], Any]] = []
    for f in dataclasses.fields(cls or TrainConfig):
        missing = f.default is dataclasses.MISSING
        default = f.default_factory() if missing else f.default  # type: ignore[operator]
        if dataclasses.is_dataclass(default):
            rows += config_fields(type(default), f"{prefix}{f.name}.")
        else:
            rows.append((f"{prefix}{f.name}", f, default))
    return rows


def describe_config(config: TrainConfig | None = None) -> str:
    """Every field of ``config`` (None: the defaults) as ``name = value``, with its default
    when the value differs, then its help (which names where the default comes from);
    what ``agentgym-eppo train --show-config`` prints.

    >>> print(describe_config().splitlines()[0])
    seed = 0
    >>> from agentgym_eppo.trainer.config.loading import load_config
    >>> "rl.lr = 1e-05" in describe_config(load_config(None, ["rl.lr=1e-5"]))
    True
    """
    values = config_to_dict(config or TrainConfig())
    lines = []
    for name, f, default in config_fields():
        value: Any = values
        for part in name.split("."):
            value = value[part]
        changed = "" if value == default else f"  (default {default!r})"
        lines.append(f"{name} = {value!r}{changed}")
        lines.append(f"    {f.metadata['help']}")
    return "\n".join(lines)


def config_to_dict(config: TrainConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def dump_config(config: TrainConfig, path: str | Path) -> None:
    """Write the resolved config as YAML (``RUN_DIR/config.yaml``)."""
    Path(path).write_text(yaml.safe_dump(config_to_dict(config), sort_keys=False), encoding="utf-8")
