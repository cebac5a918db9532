"""A server in a subprocess: start ``python -m agentgym_eppo.serving``, wait until it
accepts connections, stop it. One way to run many servers behind one trainer from
Python (see docs/serving.md); the tests and the serving benchmark use it too.

Needs no OpenEnv in this process: the server process imports it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

import httpx

START_TIMEOUT_S = 180.0


class ServerProcess:
    """``python -m agentgym_eppo.serving --task TASK *args``, started and waited for.

    ``url`` is the base URL the server printed once bound (``--port 0`` picks a free
    port); with ``wait=False`` it is set by :meth:`wait_until_ready`. Used as a context
    manager, it is stopped (SIGTERM, then SIGKILL of its process group) on exit.
    ``lines`` holds what it printed.
    """

    def __init__(
        self,
        task: str,
        *args: str,
        env: Mapping[str, str] | None = None,
        nice: int = 0,
        start_timeout_s: float = START_TIMEOUT_S,
        wait: bool = True,
    ) -> None:
        command = [sys.executable, "-m", "agentgym_eppo.serving", "--task", task, *args]
        if nice:
            command = ["nice", "-n", str(nice), *command]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.url = ""
        self._start_timeout_s = start_timeout_s
        if wait:
            self.wait_until_ready()

    @classmethod
    def many(cls, *commands: tuple[str, ...], **options: Any) -> list[ServerProcess]:
        """Start one server per ``(task, *args)`` at once, then wait for all of them."""
        servers = [cls(*command, wait=False, **options) for command in commands]
        try:
            for server in servers:
                server.wait_until_ready()
        except BaseException:
            for server in servers:
                server.__exit__()
            raise
        return servers

    def wait_until_ready(self) -> str:
        """Block until the server prints its URL; returns it."""
        if not self.url:
            self.url = self._wait_for_url(self._start_timeout_s)
        return self.url

    @property
    def pid(self) -> int:
        return self.process.pid

    def sessions(self) -> dict[str, Any]:
        """``GET /sessions``: ``active_sessions`` and ``max_sessions``."""
        return dict(httpx.get(f"{self.url}/sessions", timeout=30).json())

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, as a service manager stops it; its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.stop()
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def _wait_for_url(self, timeout: float) -> str:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            match = re.search(r" at (http://\S+) ", line)
            if match:
                threading.Thread(target=self._drain, daemon=True).start()
                return match.group(1)
        self.__exit__()
        raise RuntimeError("the server did not start:\n" + "".join(self.lines))

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
