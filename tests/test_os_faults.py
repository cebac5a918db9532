"""Hostile and broken commands: each ends as an observation, an agent status (the agent
broke its own machine) or, where the backend's own parts failed, a clean ``task_error``;
the limit holds, the host is untouched, and the next episode starts clean. Run on every
backend available."""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from support.os_backends import BACKENDS, SMALL_LIMITS, skip_unless
from support.os_calls import bash

from agentgym_eppo.environments.os import cgroups
from agentgym_eppo.environments.os.env import OSEnv
from agentgym_eppo.environments.os.sandbox import SandboxError

REPO_ROOT = Path(__file__).resolve().parents[1]
TASK = {"description": "Say done.", "evaluation": {"match": "done"}}
TIMEOUT = 2.0
INTERRUPTED = f"[the command ran longer than {TIMEOUT:g} s and was interrupted]"
RESTARTED = "[the shell exited; a new shell was started]"


@pytest.fixture(params=BACKENDS)
def env(request: pytest.FixtureRequest) -> Iterator[OSEnv]:
    skip_unless(request.param)
    environment = OSEnv([TASK], backend=request.param, limits=SMALL_LIMITS, command_timeout=TIMEOUT)
    environment.reset(options={"index": 0})
    yield environment
    environment.close()


def run(env: OSEnv, script: str) -> tuple[str, dict[str, Any]]:
    obs, reward, terminated, truncated, info = env.step(bash(script))
    assert isinstance(obs, str)
    if info["status"] == "running":
        assert (reward, terminated, truncated) == (0.0, False, False)
    return obs, info


def assert_next_episode_is_clean(env: OSEnv) -> None:
    env.reset(options={"index": 0})
    obs, info = run(
        env,
        "ls -A1 /root; ls /usr/bin | wc -l | awk '$1 > 100 {print \"usr ok\"}'; ps -e --no-headers | wc -l",
    )
    lines = obs.removeprefix("The output of the OS:\n\n").split("\n")
    assert lines[:3] == [".bashrc", ".profile", "usr ok"], obs
    assert int(lines[3]) < 12, obs  # a handful of processes: no leftovers of the last episode
    assert info["status"] == "running"


def test_fork_bomb_hits_the_pids_limit(env: OSEnv) -> None:
    obs, info = run(env, ":(){ :|:& };:")
    assert info["status"] == "running"
    assert obs.startswith("The output of the OS:\n\n[1] ")  # the bomb went to the background
    assert env.sandbox is not None
    # Watch the bomb grow (polling up to a deadline, no fixed wait) until it holds half
    # the limit's pids: proof that it multiplied; no sample may pass the limit.
    counts = [len(env.sandbox.process_ids())]
    deadline = time.monotonic() + 30
    while counts[-1] < SMALL_LIMITS.pids // 2 and time.monotonic() < deadline:
        time.sleep(0.05)
        counts.append(len(env.sandbox.process_ids()))
    assert max(counts) <= SMALL_LIMITS.pids + 1, counts
    assert counts[-1] >= SMALL_LIMITS.pids // 2, f"the bomb never multiplied: {counts}"
    assert len(env.sandbox.process_ids()) <= SMALL_LIMITS.pids + 1
    shell_output = env.sandbox.run_command("echo alive", TIMEOUT).output  # a builtin needs no pid
    assert shell_output.endswith("alive\n")
    if env.backend == "bwrap":  # the kernel's count of refused forks is in the state
        assert re.search(r"pids_max [1-9]", env.sandbox.state()), env.sandbox.state()
    assert_next_episode_is_clean(env)


def test_runaway_background_processes_of_a_timed_out_command_are_killed(env: OSEnv) -> None:
    run(env, "sleep 600 &")
    obs, _ = run(env, "for i in 1 2 3; do sleep 900 & done; sleep 100")
    assert obs.endswith(INTERRUPTED)
    obs, _ = run(env, "pgrep -c -f 'sleep 900'; pgrep -c -f 'sleep 600'")
    assert obs.endswith("0\n1\n"), obs  # the command's children died, the earlier job lives


def test_busy_loop_is_interrupted(env: OSEnv) -> None:
    obs, _ = run(env, "while true; do :; done")
    assert obs.endswith(INTERRUPTED)
    assert run(env, "echo next")[0] == "The output of the OS:\n\nnext\n"


def test_output_flood_is_cut_and_interrupted(env: OSEnv) -> None:
    obs, _ = run(env, "yes")
    body = obs.removeprefix("The output of the OS:\n\n")
    assert body.startswith("y\ny\ny\n") and body.endswith(INTERRUPTED)
    assert (
        len(body)
        <= 780 + len("\n[truncated because the output is too long]") + len(INTERRUPTED) + 1
    )
    assert run(env, "echo next")[0] == "The output of the OS:\n\nnext\n"


def test_filling_the_disk_stops_at_the_limit(env: OSEnv) -> None:
    obs, _ = run(
        env, "dd if=/dev/zero of=/root/big bs=1M count=2000; ls -s --block-size=M /root/big"
    )
    assert any(
        message in obs
        for message in ("File size limit exceeded", "File too large", "No space left")
    ), obs
    size = int(obs.rsplit("\n", 2)[-2].split("M")[0])
    assert size <= SMALL_LIMITS.file_size_bytes >> 20
    assert_next_episode_is_clean(env)


def test_huge_allocation_is_killed_by_the_memory_limit(env: OSEnv) -> None:
    obs, info = run(env, "python3 -c 'x = b\"x\" * (4 << 30); print(len(x))'; echo exit=$?")
    assert info["status"] == "running"
    assert "exit=137" in obs or "MemoryError" in obs, obs
    assert str(4 << 30) not in obs
    if env.backend == "bwrap" and "exit=137" in obs:  # the memory limit's kill is counted
        assert env.sandbox is not None
        assert re.search(r"oom_kill [1-9]", env.sandbox.state()), env.sandbox.state()
    assert run(env, "echo next")[0] == "The output of the OS:\n\nnext\n"


def test_rm_rf_root_stays_inside_the_sandbox(env: OSEnv) -> None:
    obs, info = run(env, "rm -rf --no-preserve-root / 2>/dev/null; echo done")
    assert info["status"] == "running" and (obs.endswith("done\n") or obs.endswith(INTERRUPTED))
    assert Path("/usr/bin/bash").exists() and (REPO_ROOT / "pyproject.toml").exists()
    assert_next_episode_is_clean(env)


def test_no_network_but_its_own_loopback(env: OSEnv) -> None:
    script = (
        "python3 - <<'EOF'\n"
        "import socket\n"
        "for host, port in (('1.1.1.1', 80), ('127.0.0.1', 3306)):\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=2)\n"
        "        print(host, 'reachable')\n"
        "    except OSError as error:\n"
        "        print(host, type(error).__name__)\n"
        "server = socket.socket(); server.bind(('127.0.0.1', 0)); server.listen()\n"
        "socket.create_connection(server.getsockname()); print('loopback ok')\n"
        "EOF"
    )
    obs, _ = run(env, script)
    assert "reachable" not in obs
    assert "1.1.1.1 OSError" in obs  # network unreachable: no interface but lo
    assert "127.0.0.1 ConnectionRefusedError" in obs  # the host's MariaDB is not this loopback
    assert "loopback ok" in obs


def test_host_files_are_not_visible(env: OSEnv, tmp_path: Path) -> None:
    sentinel = tmp_path / "host-secret"
    sentinel.write_text("secret")
    paths = [
        str(sentinel),
        str(REPO_ROOT),
        str(REPO_ROOT.parent),
        "/root/.pyenv",
        os.path.expanduser("~/.cache"),
    ]
    obs, _ = run(
        env, "for p in " + " ".join(paths) + "; do [ -e $p ] && echo SEEN $p; done; echo checked"
    )
    assert "SEEN" not in obs and obs.endswith("checked\n")
    users = run(env, "cut -d: -f1 /etc/passwd | tr '\\n' ' '")[0]
    assert users.removeprefix("The output of the OS:\n\n").split()[:2] == ["root", "daemon"]
    processes = run(env, "ps -eo comm --no-headers | sort -u | tr '\\n' ' '")[0]
    assert "pytest" not in processes and "python" not in processes  # no view of host processes
    assert sentinel.read_text() == "secret"


@pytest.mark.parametrize("killer", ["exit", "kill -9 $$"])
def test_killing_the_shell_starts_a_new_one_and_keeps_the_files(env: OSEnv, killer: str) -> None:
    run(env, "echo kept > /root/note; cd /tmp")
    obs, info = run(env, killer)
    assert info["status"] == "running" and obs.endswith(RESTARTED), obs
    assert run(env, "pwd; cat /root/note")[0] == "The output of the OS:\n\n/root\nkept\n"


def test_killing_everything_is_a_clean_agent_abort(env: OSEnv) -> None:
    """The agent's own action ended its machine: an agent status with the abort
    penalty, not a ``task_error`` (which the trainer leaves out of the loss)."""
    result = env.step(bash("kill -9 -1"))
    for _ in range(10):  # the shell outlives the signal until the sandbox's reaper exits
        if result[4]["status"] != "running":
            break
        time.sleep(0.2)
        result = env.step(bash("echo still here"))
    obs, reward, terminated, _, info = result
    assert (reward, terminated, info["status"]) == (-0.2, True, "agent_invalid_action")
    assert obs.startswith("The command left the machine without a working shell")
    assert_next_episode_is_clean(env)


def test_a_failure_of_the_parts_out_of_the_agents_reach_is_a_task_error(env: OSEnv) -> None:
    """The control loop (bubblewrap) or the container (Docker) gone: no process inside
    could do that, so it is the backend's fault, not the agent's."""
    sandbox = env.sandbox
    if env.backend == "bwrap":
        control = psutil.Process(sandbox._process.pid)  # type: ignore[union-attr]
        for process in [control, *control.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
    else:
        sandbox.container.remove(force=True)  # type: ignore[union-attr]
    obs, reward, terminated, _, info = env.step(bash("echo still here"))
    assert (reward, terminated, info["status"]) == (-0.2, True, "task_error"), obs
    assert obs.startswith("Task error: the sandbox died")
    assert_next_episode_is_clean(env)


def test_the_parts_out_of_reach_are_seen_gone_the_moment_they_go(env: OSEnv) -> None:
    """The race behind a backend failure scored as the agent's: asked the instant after
    the control loop (bubblewrap) was killed, before the kernel lets it be reaped, or the
    container (Docker) removed, the sandbox must already see them gone."""
    sandbox = env.sandbox
    sandbox.ensure_ready()
    assert sandbox.host_side_alive()
    if env.backend == "bwrap":
        os.kill(sandbox._process.pid, 9)  # type: ignore[union-attr]
    else:
        sandbox.container.remove(force=True)  # type: ignore[union-attr]
    assert not sandbox.host_side_alive()


def test_binary_and_non_utf8_output_become_text(env: OSEnv) -> None:
    obs, _ = run(env, "head -c 5000 /dev/urandom")
    assert obs.endswith("\n[truncated because the output is too long]") or len(obs) < 823 + 30
    obs, _ = run(env, "printf 'caf\\xe9 \\xff\\xfe\\x00end\\n'")
    assert obs == "The output of the OS:\n\ncaf\ufffd \ufffd\ufffdend\n"
    obs, _ = run(env, "echo 'héllo ✓'")
    assert obs == "The output of the OS:\n\nhéllo ✓\n"


def test_a_group_busy_past_the_close_wait_is_removed_later() -> None:
    """A cgroup that cannot be removed within the wait (here: a child group that goes
    away only later, as a huge tmpfs keeps a dying sandbox's group busy) is not left
    behind: the background remover takes it once it empties."""
    skip_unless("bwrap")
    group = cgroups.EpisodeCgroup("late-removal-test", cgroups.CgroupLimits())
    path = group.paths[0]
    child = path / "busy"
    child.mkdir()
    releaser = threading.Timer(0.6, child.rmdir)
    releaser.start()
    try:
        group.remove(wait_s=0.1)
        assert path.exists() and path in cgroups._LATE_REMOVER.pending()  # not given up
        deadline = time.monotonic() + 30
        while path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not path.exists()
    finally:
        releaser.join()
        with contextlib.suppress(OSError):
            child.rmdir()
        with contextlib.suppress(OSError):
            path.rmdir()


def test_a_sandbox_that_dies_before_the_first_action_is_started_again() -> None:
    """The reserve sandbox (started when the last episode ended) dies while it waits for
    ``reset``: the episode starts in a fresh one, counted in ``start_retries``."""
    skip_unless("bwrap")
    env = OSEnv([TASK], limits=SMALL_LIMITS, command_timeout=TIMEOUT)
    try:
        env.reset(options={"index": 0})
        env.step({"name": "answer_action", "arguments": {"answer": "done"}})
        reserve = env._reserve._ready
        assert reserve is not None  # started when the episode ended
        reserve.ensure_ready()
        reserve._cgroup.kill()  # type: ignore[attr-defined]  # the holder and the shell die
        deadline = time.monotonic() + 10
        while reserve._cgroup.pids() and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.01)
        env.reset(options={"index": 0})
        assert env.start_retries == 1
        obs, info = run(env, "echo alive")
        assert obs == "The output of the OS:\n\nalive\n" and info["status"] == "running"
    finally:
        env.close()


def test_an_init_script_that_always_fails_is_retried_once_then_reported() -> None:
    skip_unless("bwrap")
    broken = {**TASK, "create": {"init": {"code": "echo broken; exit 3"}}}
    env = OSEnv([broken], limits=SMALL_LIMITS, command_timeout=TIMEOUT)
    try:
        with pytest.raises(SandboxError, match="init script failed with exit code 3 after"):
            env.reset(options={"index": 0})
        assert env.start_retries == 1
    finally:
        env.close()
