"""The one way config fields are declared, so every knob carries its documentation."""

from __future__ import annotations

from dataclasses import field
from typing import Any


def help_field(text: str, default: Any) -> Any:
    """A field with an immutable default and its documentation (``metadata["help"]``)."""
    return field(default=default, metadata={"help": text})
