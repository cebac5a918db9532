"""The progress display of every long stage (pretraining, SFT, evaluation, RL).

In a terminal, with ``progress`` on, a bar redraws in place. In a log file, under
``nohup`` or in CI, a bar would be printed only when it stops, so there each stage prints
a line as each unit of its work ends instead; :func:`live_bar` says which of the two.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def live_bar(enabled: bool, console: Console) -> bool:
    """Whether to draw a live bar: ``enabled`` (the config's ``progress``) and ``console``
    is a terminal.

    >>> import io
    >>> live_bar(True, Console(file=io.StringIO()))
    False
    >>> live_bar(True, Console(file=io.StringIO(), force_terminal=True))
    True
    """
    return enabled and console.is_terminal


def progress_bar(console: Console, live: bool) -> Progress:
    """A bar with the stage's description, work done of its total, the time spent and the
    time left; it draws nothing unless ``live``."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not live,
    )
