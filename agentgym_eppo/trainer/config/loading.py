"""Reading a config: YAML plus ``key=value`` overrides into plain values
(:func:`read_config_values`), then into a config dataclass whose every key is known and
every value of its annotated type (:func:`build_config`). The trainer's
:class:`~.train.TrainConfig` (:func:`load_config`) and the pretraining's config are both
read this way.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from agentgym_eppo.core.registry import did_you_mean

from .train import TrainConfig, import_modules

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

C = TypeVar("C", bound="DataclassInstance")


def _convert(kind: Any, value: Any, where: str) -> Any:
    """Check/convert a YAML value to the annotated type ``kind``."""
    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(option, value, where)
            except (TypeError, ValueError) as error:
                errors.append(str(error))
        raise TypeError(errors[0] if errors else f"{where}: cannot be None")
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        if not isinstance(value, Mapping):
            raise TypeError(f"{where}: expected a mapping, got {value!r}")
        return build_config(kind, value, where)
    if origin is dict:
        if not isinstance(value, Mapping):
            raise TypeError(f"{where}: expected a mapping, got {value!r}")
        key_type, value_type = typing.get_args(kind)
        return {
            _convert(key_type, k, where): _convert(value_type, v, f"{where}.{k}")
            for k, v in value.items()
        }
    if origin is list:
        if not isinstance(value, Sequence) or isinstance(value, str):
            raise TypeError(f"{where}: expected a list, got {value!r}")
        (item_type,) = typing.get_args(kind)
        return [_convert(item_type, item, where) for item in value]
    if kind is Any:
        return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is float and isinstance(value, str):
        try:  # YAML 1.1 reads 1e-5 (no dot) as a string
            return float(value)
        except ValueError:
            raise TypeError(f"{where}: expected a number, got {value!r}") from None
    if kind is bool and not isinstance(value, bool):
        raise TypeError(f"{where}: expected true or false, got {value!r}")
    if kind is int and isinstance(value, bool):
        raise TypeError(f"{where}: expected an integer, got {value!r}")
    if not isinstance(value, kind):
        raise TypeError(f"{where}: expected {kind.__name__}, got {value!r}")
    return value


def build_config(cls: type[C], values: Mapping[str, Any], where: str = "") -> C:
    """The config dataclass ``cls`` built from nested plain values (as
    :func:`read_config_values` reads them): every key known to ``cls`` (an unknown one is
    an error naming the closest), every value converted to its annotated type, nested
    sections built alike; ``cls`` checks itself when built. ``where`` prefixes the keys
    that errors name.

    >>> from agentgym_eppo.trainer.config.sections import RLConfig
    >>> build_config(RLConfig, {"steps": 3, "lr": 1}).lr
    1.0
    >>> build_config(RLConfig, {"step": 3}, "rl")
    Traceback (most recent call last):
    ...
    ValueError: unknown config key rl.step (did you mean rl.steps?); known: ...
    """
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        prefix = f"{where}." if where else ""
        hint = did_you_mean(unknown[0], sorted(names), show=lambda name: f"{prefix}{name}")
        raise ValueError(
            f"unknown config key {prefix}{unknown[0]}{hint}; known: {', '.join(sorted(names))}"
        )
    kwargs = {
        name: _convert(hints[name], value, f"{where}.{name}" if where else name)
        for name, value in values.items()
    }
    return cls(**kwargs)


def config_from_dict(values: Mapping[str, Any]) -> TrainConfig:
    """Build (and so validate) a :class:`TrainConfig` from nested plain values (the
    modules of ``imports`` first, so that what they register is known to the sections)."""
    import_modules(_convert(list[str], values.get("imports") or [], "imports"))
    return build_config(TrainConfig, values)


def apply_override(values: dict[str, Any], override: str) -> None:
    """Apply one ``dotted.key=value`` (value parsed as YAML) to nested ``values`` in place."""
    if "=" not in override:
        raise ValueError(f"an override is key=value, e.g. rl.steps=10; got {override!r}")
    key, raw = override.split("=", 1)
    parts = key.strip().split(".")
    node = values
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ValueError(f"{key}: {part} is not a section")
        node = child
    node[parts[-1]] = yaml.safe_load(raw)


def read_config_values(path: str | Path | None, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The plain values of a YAML config (None = none) with ``key=value`` overrides applied."""
    values: dict[str, Any] = {}
    if path is not None:
        loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        if loaded is not None and not isinstance(loaded, dict):
            raise ValueError(f"{path}: a config is a YAML mapping, got {type(loaded).__name__}")
        values = loaded or {}
    for override in overrides:
        apply_override(values, override)
    return values


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read a YAML config (None = all defaults), apply ``key=value`` overrides, build it
    (which validates it)."""
    return config_from_dict(read_config_values(path, overrides))
