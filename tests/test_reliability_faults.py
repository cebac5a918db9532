"""Faults injected into a running MultiTaskVectorEnv of real environments.

Each fault hits one slot's episode while another slot runs beside it. The hit episode
ends as ``task_error`` with the abort penalty (and says why); the other slot's episode
goes on untouched, and the hit slot plays a fresh episode to the end afterwards.
Faults: ``kill -9`` of an env worker, of the OS sandbox's shell and of the sandbox
itself, of a real Oxigraph SPARQL server, ``KILL CONNECTION`` of the episode's MariaDB
connection (from an admin connection: the shared MariaDB server is never restarted,
other test suites use it), a full disk inside the sandbox (the agent's own doing: an
ordinary observation), and a step that never ends, which must not hold back the other
slots. A backend that cannot run here (bubblewrap, the Oxigraph server, MariaDB) skips
with the reason; under CI that fails the run (``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator

import psutil
import pytest
import sqlalchemy as sa
from support.db_servers import MARIADB_URL, server_url
from support.os_backends import skip_unless
from support.os_calls import bash
from support.vector_test_envs import GUESS

from agentgym_eppo.core import Status
from agentgym_eppo.vector import EXPERT_ACTION, MultiTaskVectorEnv, StepOutcome

KG = "AgentBench-KG-v0"
WEBSHOP = "AgentBench-WebShop-v0"


def _play_to_the_end(venv: MultiTaskVectorEnv, index: int) -> StepOutcome:
    while True:
        (outcome,) = venv.step_some([index], [EXPERT_ACTION])
        if outcome.terminated or outcome.truncated:
            return outcome


def _assert_task_error(outcome: StepOutcome, reason: str) -> None:
    assert outcome.info["status"] == Status.TASK_ERROR.value, outcome.observation
    assert (outcome.reward, outcome.terminated, outcome.truncated) == (-0.2, True, False)
    assert outcome.info["success"] is False
    assert reason in outcome.observation


def _assert_agent_abort(outcome: StepOutcome, reason: str) -> None:
    assert outcome.info["status"] == Status.AGENT_INVALID_ACTION.value, outcome.observation
    assert (outcome.reward, outcome.terminated, outcome.truncated) == (-0.2, True, False)
    assert reason in outcome.observation


def _assert_unharmed_and_recovers(venv: MultiTaskVectorEnv, hit: int, other: int) -> None:
    """The other slot's episode finishes with its expert; the hit slot plays a new one."""
    assert _play_to_the_end(venv, other).info["status"] == "completed"
    venv.reset_some([hit])
    assert _play_to_the_end(venv, hit).info["status"] == "completed"


# ---------------------------------------------------------------------- workers


def test_kill_9_of_an_env_worker_ends_only_its_episode_as_task_error() -> None:
    venv = MultiTaskVectorEnv([KG, WEBSHOP], split="dev", backend="subprocess")
    try:
        venv.reset_some([0, 1])
        venv.step_some([0, 1], [EXPERT_ACTION, EXPERT_ACTION])
        victim = venv.pool.pids()[0]  # type: ignore[attr-defined]
        os.kill(victim, signal.SIGKILL)
        hit, other = venv.step_some([0, 1], [EXPERT_ACTION, EXPERT_ACTION])
        _assert_task_error(hit, "the episode was lost with its worker")
        assert hit.info["worker_restarted"] is True
        assert [step["status"] for step in hit.info["trajectory"][1:]] == ["running", "task_error"]
        assert other.info["status"] in ("running", "completed")
        assert victim not in venv.pool.pids()  # type: ignore[attr-defined]
        if other.info["status"] == "running":
            _assert_unharmed_and_recovers(venv, hit=0, other=1)
        else:
            venv.reset_some([0])
            assert _play_to_the_end(venv, 0).info["status"] == "completed"
    finally:
        venv.close()


# ---------------------------------------------------------------------- OS sandbox


@pytest.fixture
def os_venv() -> Iterator[MultiTaskVectorEnv]:
    from agentgym_eppo.environments.os.sandbox import SandboxLimits

    skip_unless("bwrap")
    limits = SandboxLimits(disk_bytes=64 << 20, file_size_bytes=32 << 20)
    venv = MultiTaskVectorEnv(
        [
            ("AgentBench-OS-v0", {"prestart": False, "limits": limits}),
            ("AgentBench-OS-v0", {"prestart": False, "limits": limits}),
        ],
        split="dev",
        backend="subprocess",
    )
    venv.reset_some([0, 1])
    yield venv
    venv.close()


def _host_process_of(marker: str) -> psutil.Process:
    """The host-side process of a sandboxed ``sleep`` started under the name ``marker``."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for process in psutil.process_iter(["cmdline"]):
            if marker in " ".join(process.info["cmdline"] or []):
                return process
        time.sleep(0.05)
    raise AssertionError(f"no process named {marker}")


def _start_marked_sleep(venv: MultiTaskVectorEnv, index: int) -> psutil.Process:
    marker = f"agentgym-fault-{uuid.uuid4().hex[:12]}"
    (outcome,) = venv.step_some([index], [bash(f"(exec -a {marker} sleep 600) &")])
    assert outcome.info["status"] == "running"
    return _host_process_of(marker)


def test_kill_9_of_the_sandbox_shell_from_the_host_replaces_the_shell(
    os_venv: MultiTaskVectorEnv,
) -> None:
    """Killed between two commands, the shell is replaced, as one that exits is (the agent
    can kill its own shell so, with a background ``kill -9 $PPID``): the next command
    says so, the new shell works and sees its exit, and the episode goes on."""
    shell = _start_marked_sleep(os_venv, 0).parent()
    assert shell is not None and shell.cmdline()[:2] == ["bash", "--login"]
    shell.send_signal(signal.SIGKILL)
    (outcome,) = os_venv.step_some([0], [bash("echo still here")])
    assert outcome.info["status"] == "running", outcome.observation
    assert outcome.observation.endswith("[the shell exited; a new shell was started]")
    (outcome,) = os_venv.step_some([0], [bash("echo back; exit")])
    assert outcome.info["status"] == "running", outcome.observation
    assert "back\n" in outcome.observation  # the exit seen at once: its nonce was read right
    assert outcome.observation.endswith("[the shell exited; a new shell was started]")
    _assert_unharmed_and_recovers(os_venv, hit=0, other=1)


def test_kill_9_of_the_whole_sandbox_ends_its_episode_cleanly(
    os_venv: MultiTaskVectorEnv,
) -> None:
    """The agent can end its sandbox the same way from inside (``kill -9 -1`` reaches the
    namespace holder) while the control loop runs on: an agent status, as that one."""
    sleeper = _start_marked_sleep(os_venv, 0)
    # The sandbox is every process the control loop started: the namespace holder and the
    # agent's view (both bwrap), and all inside them; the control loop stays (our side).
    control = next(p for p in sleeper.parents() if p.name() == "bwrap").parent()
    for process in control.children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):  # gone with its parent already
            process.send_signal(signal.SIGKILL)
    (outcome,) = os_venv.step_some([0], [bash("echo still here")])
    if outcome.info["status"] == "running":  # the kill may land between two commands
        (outcome,) = os_venv.step_some([0], [bash("echo still here")])
    _assert_agent_abort(outcome, "the sandbox's shell did not start")
    _assert_unharmed_and_recovers(os_venv, hit=0, other=1)


def test_disk_full_in_the_sandbox_is_an_observation_and_harms_no_other_episode(
    os_venv: MultiTaskVectorEnv,
) -> None:
    fill = "for i in 1 2 3 4; do head -c 30M /dev/zero > /root/f$i || { echo full at $i; break; }; done"
    (outcome,) = os_venv.step_some([0], [bash(fill)])
    assert outcome.info["status"] == "running"
    assert "No space left on device" in outcome.observation
    assert "full at 3" in outcome.observation
    (outcome,) = os_venv.step_some([0], [bash("rm /root/f* && echo freed")])
    assert outcome.observation == "The output of the OS:\n\nfreed\n"
    (other,) = os_venv.step_some([1], [bash("echo fine > /root/x && cat /root/x")])
    assert other.observation == "The output of the OS:\n\nfine\n"
    _assert_unharmed_and_recovers(os_venv, hit=0, other=1)


@pytest.mark.slow
def test_closing_the_vector_env_mid_command_leaves_no_sandbox_cgroup() -> None:
    from agentgym_eppo.environments.os.cgroups import CGROUP_ROOT, GROUP_PREFIX

    skip_unless("bwrap")
    venv = MultiTaskVectorEnv({"AgentBench-OS-v0": 1}, split="dev", backend="subprocess")
    worker = venv.pool.pids()[0]  # type: ignore[attr-defined]
    venv.reset_some([0])
    marker = f"agentgym-fault-{uuid.uuid4().hex[:12]}"
    venv.submit_steps([0], [bash(f"bash -c 'exec -a {marker} sleep 25'")])
    _host_process_of(marker)  # the command is running: close now, in the middle of it
    venv.close()
    assert not psutil.pid_exists(worker) or psutil.Process(worker).status() == "zombie"
    assert sorted(CGROUP_ROOT.rglob(f"{GROUP_PREFIX}{worker}-*")) == []


# ---------------------------------------------------------------------- SPARQL endpoint


def test_kill_9_of_the_sparql_server_ends_its_episode_as_task_error() -> None:
    from agentgym_eppo.environments.kg.server import oxigraph_binary, serve_graph
    from agentgym_eppo.environments.kg.tasks import shipped_graph_path

    binary = oxigraph_binary()
    if binary is None:
        pytest.skip("the Oxigraph server is not installed: pip install oxigraph (dev extra)")
    # A dead server refuses the connection: the step ends at once with "cannot reach",
    # not after endpoint_timeout with "did not answer" (no wall-clock bound asserted).
    with serve_graph(shipped_graph_path(), binary=binary) as url:
        server = next(
            p for p in psutil.Process().children(recursive=True) if "oxigraph" in p.name()
        )
        venv = MultiTaskVectorEnv(
            [(KG, {"sparql_endpoint": url, "endpoint_timeout": 5.0}), (KG, {})],
            split="dev",
            backend="subprocess",
        )
        try:
            venv.reset_some([0, 1])
            first = venv.step_some([0], [EXPERT_ACTION])[0]
            assert first.info["status"] == "running", first.observation
            server.send_signal(signal.SIGKILL)
            server.wait(10)
            hit, other = venv.step_some([0, 1], [EXPERT_ACTION, EXPERT_ACTION])
            _assert_task_error(hit, f"cannot reach SPARQL endpoint {url}")
            assert other.info["status"] in ("running", "completed")
            if other.info["status"] == "running":
                assert _play_to_the_end(venv, 1).info["status"] == "completed"
        finally:
            venv.close()


# ---------------------------------------------------------------------- MariaDB


@pytest.fixture
def mariadb_admin() -> Iterator[sa.Engine]:
    engine = sa.create_engine(server_url(MARIADB_URL), connect_args={"connect_timeout": 3})
    yield engine
    engine.dispose()


@pytest.mark.mariadb
def test_kill_connection_of_the_episode_database_ends_it_as_task_error(
    mariadb_admin: sa.Engine,
) -> None:
    venv = MultiTaskVectorEnv(
        {"AgentBench-DB-v0": 2},
        split="dev",
        env_kwargs={"AgentBench-DB-v0": {"db_url": MARIADB_URL}},
        backend="subprocess",
    )
    try:
        venv.reset_some([0, 1])
        query = {"name": "execute_sql", "arguments": {"query": "SELECT CONNECTION_ID()"}}
        (found,) = venv.step_some([0], [query])
        connection_id = int(found.observation.strip("[](),"))
        with mariadb_admin.connect() as admin:
            admin.exec_driver_sql(f"KILL CONNECTION {connection_id}")
        query = {"name": "execute_sql", "arguments": {"query": "SELECT 1"}}
        hit, other = venv.step_some([0, 1], [query, query])
        assert other.observation == "[(1,)]"
        _assert_task_error(hit, "connection")
        _assert_unharmed_and_recovers(venv, hit=0, other=1)
    finally:
        venv.close()


# ---------------------------------------------------------------------- slow env


@pytest.mark.slow
def test_a_step_that_never_ends_does_not_hold_back_the_other_slots() -> None:
    """Slot 0's step sleeps far longer than the test runs; slot 1 plays a whole episode
    meanwhile. The property is the order of events, not a duration: every outcome
    collected is slot 1's, and slot 0's step is still pending when slot 1 is done."""
    venv = MultiTaskVectorEnv([GUESS, KG], split="dev", backend="subprocess")
    try:
        venv.reset_some([0, 1])
        venv.submit_steps([0], [{"name": "wait", "arguments": {"seconds": "3600"}}])
        fast_steps = 0
        while True:
            venv.submit_steps([1], [EXPERT_ACTION])
            (outcome,) = venv.collect_steps()
            assert outcome.index == 1
            fast_steps += 1
            if outcome.terminated or outcome.truncated:
                break
        assert outcome.info["status"] == "completed"
        assert fast_steps >= 2
        assert venv.collect_steps(timeout=0) == []  # slot 0 is still waiting
    finally:
        venv.close()  # stops the sleeping worker
