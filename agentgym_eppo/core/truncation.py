"""Output truncation as AgentBench does it, so observations stay within a model's context."""

from __future__ import annotations

DEFAULT_OUTPUT_LIMIT = 800
TRUNCATION_MARKER = "[TRUNCATED]"


def truncate_output(
    text: str, limit: int = DEFAULT_OUTPUT_LIMIT, marker: str = TRUNCATION_MARKER
) -> str:
    """Cut ``text`` to at most ``limit`` characters, ending with ``marker`` when cut.

    The result is never longer than ``limit`` (the marker counts), so the limit is a
    real bound on what the model sees. ``limit <= 0`` disables truncation.
    """
    if limit <= 0 or len(text) <= limit:
        return text
    keep = max(0, limit - len(marker))
    return text[:keep] + marker[: limit - keep]
