"""The real ``serve`` command in a subprocess: a client killed mid-episode leaves no
sandbox behind, and a server stopped with SIGTERM frees its sessions, exits cleanly
and serves again when started on the same port."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("openenv", reason="openenv-core is not installed (the serve extra)")

from openenv.core.generic_client import GenericEnvClient
from support.processes import sandboxes
from support.serving_support import wait_until

from agentgym_eppo.serving.process import ServerProcess

CLIENT = textwrap.dedent(
    """
    import sys, time
    from openenv.core.generic_client import GenericEnvClient

    env = GenericEnvClient(base_url=sys.stdin.readline().strip()).sync()
    env.reset(index=0)
    call = {"name": "bash_action", "arguments": {"script": "echo started"}}
    result = env.step({"tool_call": call})
    assert not result.done, result
    print("mid-episode", flush=True)
    time.sleep(600)
    """
)


STARTED = {"name": "bash_action", "arguments": {"script": "echo started"}}


@pytest.mark.slow
def test_killed_client_stopped_server_and_restart_leave_no_sandbox() -> None:
    # the client imports OpenEnv while the server starts, then reads the server's URL
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    # the idle timeout is far away: a sandbox must go because its connection went
    with ServerProcess("os", "--port", "0", "--idle-timeout", "600", wait=False) as server:
        try:
            assert client.stdin is not None and client.stdout is not None
            client.stdin.write(server.wait_until_ready() + "\n")
            client.stdin.flush()
            assert client.stdout.readline().strip() == "mid-episode"
            assert server.sessions()["active_sessions"] == 1
            assert sandboxes(server.pid)
            client.send_signal(signal.SIGKILL)
            client.wait(timeout=10)
            assert wait_until(lambda: server.sessions()["active_sessions"] == 0, timeout=30)
            assert wait_until(lambda: not sandboxes(server.pid), timeout=30)
        finally:
            if client.poll() is None:
                client.kill()
                client.wait()

        # stopped with a session open mid-episode
        with GenericEnvClient(base_url=server.url).sync() as open_session:
            open_session.reset(index=0)
            open_session.step({"tool_call": STARTED})
            held = sandboxes(server.pid)
            assert held and server.sessions()["active_sessions"] == 1
            # uvicorn shuts down gracefully, then ends itself by the signal it got
            assert server.stop() in (0, -signal.SIGTERM)
            assert wait_until(lambda: not any(p.is_running() for p in held), timeout=30)
            with pytest.raises(Exception):  # noqa: B017 - the connection is gone, any way
                open_session.step({"tool_call": STARTED})

    port = server.url.rsplit(":", 1)[1]
    with ServerProcess("os", "--port", port) as again:
        assert again.url == server.url
        with GenericEnvClient(base_url=again.url).sync() as client:
            client.reset(index=0)
            result = client.step({"tool_call": STARTED})
            assert result.observation["text"].rstrip().endswith("started")
            assert again.sessions()["active_sessions"] == 1
