"""The OS env's tool calls as the OS tests write them (``{"name", "arguments"}``)."""

from __future__ import annotations

from typing import Any


def bash(script: str) -> dict[str, Any]:
    """Run ``script`` in the episode's shell."""
    return {"name": "bash_action", "arguments": {"script": script}}


def answer(text: str) -> dict[str, Any]:
    """Answer the task with ``text``."""
    return {"name": "answer_action", "arguments": {"answer": text}}
