"""Servers for the serving tests: in a thread of the test process (cheap: OpenEnv and the
environments are imported once), or as the real command in a subprocess (for stopping,
restarting and leak counting)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 120.0


@contextlib.contextmanager
def thread_server(task: str, **config: Any) -> Iterator[str]:
    """Serve ``task`` on a free loopback port in a thread; yields the base URL."""
    from agentgym_eppo.serving.server import ServeConfig, bind

    server, sock, url = bind(ServeConfig(task=task, port=0, **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the {task} server did not start")
            time.sleep(0.05)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


class ServerProcess:
    """``python -m agentgym_eppo.serving`` in a subprocess, started and waited for."""

    def __init__(self, task: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "agentgym_eppo.serving", "--task", task, *args],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.url = self._wait_for_url()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _wait_for_url(self) -> str:
        assert self.process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            match = re.search(r" at (http://\S+) ", line)
            if match:
                threading.Thread(target=self._drain, daemon=True).start()
                return match.group(1)
        self.stop()
        raise RuntimeError("the server did not start:\n" + "".join(self.lines))

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def sessions(self) -> dict[str, int]:
        return dict(httpx.get(f"{self.url}/sessions", timeout=10).json())

    def stop(self, timeout: float = 30.0) -> int:
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


def wait_until(predicate: Any, timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
