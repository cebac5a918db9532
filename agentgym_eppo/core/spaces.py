"""A text space that admits real text.

Gymnasium's ``Text`` defaults to the charset ``[0-9A-Za-z]`` and ``min_length=1``, so a
real observation ("ls: cannot access 'x'") is not ``in`` it, and a full-Unicode charset
pickles to tens of megabytes. :class:`UnicodeText` keeps a small printable charset for
sampling but accepts any string up to ``max_length``.
"""

from __future__ import annotations

import string
from typing import Any

from gymnasium.spaces import Text

PRINTABLE_CHARSET = string.printable
DEFAULT_MAX_LENGTH = 1 << 20


class UnicodeText(Text):
    """Any Unicode string of at most ``max_length`` characters (samples printable ASCII)."""

    def __init__(
        self, max_length: int = DEFAULT_MAX_LENGTH, *, min_length: int = 0, seed: Any = None
    ) -> None:
        super().__init__(
            max_length=max_length, min_length=min_length, charset=PRINTABLE_CHARSET, seed=seed
        )

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """Printable text of a short random length, so that sampled actions stay cheap."""
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        length = int(self.np_random.integers(self.min_length, min(self.max_length, 64) + 1))
        return super().sample(mask=(length, None))

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, UnicodeText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )

    def __hash__(self) -> int:
        return hash((UnicodeText, self.min_length, self.max_length))
