"""Starting the next episode's sandbox while the current one runs.

A cold bubblewrap sandbox takes tens of milliseconds to start (mount namespace, overlays,
the login shell), a container a few hundred. With ``prestart`` the environment keeps one
sandbox starting in reserve, so that ``reset`` only takes it. The factory either returns
at once with a sandbox still booting (bubblewrap: ``wait=False``, finished by
``ensure_ready``) or blocks (Docker), in which case it runs in a background thread.
Bubblewrap must not be started from a thread that ends: ``--die-with-parent`` is a
parent-death signal, which Linux sends when the creating *thread* exits. The reserve is
keyed (the Docker image of the next task may differ); a key mismatch or a failed
background start falls back to a start in the foreground.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable

from .sandbox import Sandbox


class SandboxReserve:
    """At most one sandbox started ahead, for the key the next ``take`` is likely to ask."""

    def __init__(
        self,
        factory: Callable[[Hashable], Sandbox],
        *,
        enabled: bool = True,
        threaded: bool = False,
    ) -> None:
        self.factory = factory
        self.enabled = enabled
        self.threaded = threaded
        self._thread: threading.Thread | None = None
        self._key: Hashable = None
        self._ready: Sandbox | None = None
        self._error: BaseException | None = None

    def take(self, key: Hashable) -> Sandbox:
        """A started sandbox for ``key``: the reserve's if it matches, else a new one."""
        sandbox = self._collect(key)
        return sandbox if sandbox is not None else self.factory(key)

    def refill(self, key: Hashable) -> None:
        """Start the next sandbox for ``key`` (called when an episode ends, so that the
        launch costs the teardown, not the next ``reset``)."""
        if self.enabled and self._thread is None and self._ready is None:
            self._start(key)

    def close(self) -> None:
        """Stop keeping a reserve and close the one started, if any."""
        self.enabled = False
        sandbox = self._collect(None, any_key=True)
        if sandbox is not None:
            sandbox.close()

    def _start(self, key: Hashable) -> None:
        self._key = key
        if not self.threaded:
            self._make(key)
            return
        self._thread = threading.Thread(target=self._make, args=(key,), daemon=True)
        self._thread.start()

    def _make(self, key: Hashable) -> None:
        try:
            self._ready = self.factory(key)
        except BaseException as error:  # reported as a foreground start instead
            self._error = error

    def _collect(self, key: Hashable, *, any_key: bool = False) -> Sandbox | None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        sandbox, self._ready, self._error = self._ready, None, None
        if sandbox is not None and not any_key and self._key != key:
            sandbox.close()
            return None
        return sandbox
