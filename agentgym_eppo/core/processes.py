"""Small process helpers shared by the sandboxes, the workers and the trainer's launcher."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import Any


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie counts; another user's process too).

    >>> pid_alive(os.getpid())
    True
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def once_per_process(function: Callable[..., object]) -> Callable[..., None]:
    """``function`` runs on its first call only, whatever thread makes it; later calls
    (with any arguments) return at once, after the first has finished. Its result is
    dropped.

    >>> calls = []
    >>> clean = once_per_process(lambda where: calls.append(where))
    >>> clean("a"); clean("b")
    >>> calls
    ['a']
    """
    lock = threading.Lock()
    done = False

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        nonlocal done
        with lock:
            if not done:
                function(*args, **kwargs)
                done = True

    return wrapper
