"""Servers for the serving tests in a thread of the test process (cheap: OpenEnv and the
environments are imported once); the real command in a subprocess is the package's
:class:`~agentgym_eppo.serving.process.ServerProcess`."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

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


def wait_until(predicate: Any, timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())
