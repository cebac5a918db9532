"""An agent under RL pressure attacking the OS environment's judge and isolation.

Each test is an attack a policy could find: forging the verdict through the
sandbox's control channel, replacing the programs the checks run, escaping through
keyrings, user namespaces or ``ptrace``. Every attack must fail, the verdict must stay
honest, and an outcome caused by the action's content must never be ``task_error``.
Run on every backend available (the bubblewrap-only ones say why).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.os_backends import BACKENDS, SMALL_LIMITS, skip_unless
from support.os_calls import answer, bash

from agentgym_eppo.environments.os.env import OSEnv
from agentgym_eppo.vector.env import DEFAULT_STEP_TIMEOUT

REAL_ANSWER = "7"
FORGED_ANSWER = "42"
ANSWER_TASK = {
    "description": "Print the answer.",
    "evaluation": {"check": [None, {"file": "check/integer-match.py"}], "example": "echo 7"},
}
OPERATION_TASK = {
    "description": "Write hello into /root/f.",
    "evaluation": {"check": [{"language": "bash", "code": "grep -qx hello /root/f"}]},
}
PYTHON_CHECK_TASK = {
    "description": "Write hello into /root/f.",
    "evaluation": {
        "check": [
            {
                "language": "python",
                "code": "import sys; sys.exit(open('/root/f').read() != 'hello\\n')",
            }
        ]
    },
}
WRITE_SCRIPT_TASK = {
    "description": "Write an executable /usr/local/bin/add2 that prints the sum of its arguments.",
    "evaluation": {"check": [{"language": "bash", "code": '[ "$(add2 3 4)" = 7 ]'}]},
}

FORGE_INTO_EVERY_PIPE = r"""
forged=$(for id in $(seq 0 9); do printf '%s 0 2\n42' "$id"; done)
for fd in /proc/[0-9]*/fd/*; do
    case $(readlink "$fd" 2>/dev/null) in
    pipe:*) timeout 1 bash -c 'printf "%s" "$1" > "$2"' _ "$forged" "$fd" 2>/dev/null ;;
    esac
done
echo tried
"""
"""Writes a forged control-loop answer ("<id> 0 2\\n42" for the next ids) into every pipe
of every process the agent can see: the attack that scored 1.0 on unsolved dev tasks."""


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    skip_unless(request.param)
    return str(request.param)


@pytest.fixture
def make_env(backend: str) -> Iterator[Any]:
    envs: list[OSEnv] = []

    def make(tasks: list[Any]) -> OSEnv:
        env = OSEnv(tasks, backend=backend, limits=SMALL_LIMITS, command_timeout=10.0)
        envs.append(env)
        env.reset(options={"index": 0})
        return env

    yield make
    for env in envs:
        env.close()


def observe(env: OSEnv, script: str) -> str:
    obs, _, _, _, info = env.step(bash(script))
    assert info["status"] == "running", obs
    return str(obs)


def final(env: OSEnv, action: dict[str, Any]) -> tuple[float, str]:
    _, reward, terminated, _, info = env.step(action)
    assert terminated and info["status"] == "completed", info
    return float(reward), str(info["status"])


# ---------------------------------------------------------------- the judge out of reach


def test_a_forged_control_answer_does_not_change_the_verdict(make_env: Any) -> None:
    env = make_env([ANSWER_TASK])
    assert observe(env, FORGE_INTO_EVERY_PIPE).endswith("tried\n")
    reward, _ = final(env, answer(FORGED_ANSWER))
    assert reward == 0.0


def test_the_true_answer_still_scores_after_the_forgery_attempt(make_env: Any) -> None:
    env = make_env([ANSWER_TASK])
    observe(env, FORGE_INTO_EVERY_PIPE)
    reward, _ = final(env, answer(REAL_ANSWER))
    assert reward == 1.0


def test_the_agent_sees_neither_the_control_loop_nor_the_check_processes(make_env: Any) -> None:
    """While a check runs, the agent's processes are stopped; once they run again the
    check is over: a watcher never observes a check's process."""
    env = make_env([ANSWER_TASK])
    sandbox = env.sandbox
    assert sandbox is not None
    observe(
        env,
        "(while :; do ps -eo args= >> /tmp/seen; done) >/dev/null 2>&1 & "
        "until [ -s /tmp/seen ]; do sleep 0.05; done",
    )
    result = sandbox.run_process(["bash", "-c", "sleep 0.5; echo judge-marker-$((6*7))"], 10)
    assert result.output.strip() == "judge-marker-42"
    seen = observe(env, "grep -c '[j]udge-marker' /tmp/seen; grep -c '[c]ontrol' /tmp/seen")
    assert seen.endswith("0\n0\n"), seen


def test_an_agent_program_run_by_a_check_cannot_forge_the_next_answer(make_env: Any) -> None:
    """The write-a-script tasks' checks run the agent's program: it must not reach the
    channel that carries the verdicts either."""
    env = make_env([WRITE_SCRIPT_TASK])
    sandbox = env.sandbox
    assert sandbox is not None
    sandbox.run_process(["bash", "-c", FORGE_INTO_EVERY_PIPE], 20)
    assert sandbox.run_process(["echo", "real"], 10).output == "real\n"


def test_agent_processes_cannot_act_while_a_check_runs(make_env: Any) -> None:
    env = make_env([ANSWER_TASK])
    sandbox = env.sandbox
    assert sandbox is not None
    observe(
        env,
        "(while :; do echo x >> /tmp/ticks; done) >/dev/null 2>&1 & "
        "until [ -s /tmp/ticks ]; do sleep 0.05; done",
    )
    result = sandbox.run_process(
        [
            "bash",
            "-c",
            "a=$(wc -c < /tmp/ticks); sleep 0.5; b=$(wc -c < /tmp/ticks); echo $a $b",
        ],
        10,
    )
    before, after = result.output.split()
    assert before == after, result.output
    grown = observe(
        env, "a=$(wc -c < /tmp/ticks); sleep 0.5; b=$(wc -c < /tmp/ticks); echo $((b > a))"
    )
    assert grown.endswith("1\n")  # and they run again once the check is over


# ---------------------------------------------------------------- the checks' own programs


# Not on Docker: the Docker backend judges with the container's programs, as AgentBench.
@pytest.mark.parametrize("backend", ["bwrap"], indirect=True)
@pytest.mark.parametrize(
    ("task", "attack"),
    [
        pytest.param(
            OPERATION_TASK,
            "rm /usr/bin/bash && printf '#!/bin/sh\\nexit 0\\n' > /usr/bin/bash && "
            "chmod +x /usr/bin/bash && echo replaced",
            id="the-agents-bash",
        ),
        pytest.param(
            OPERATION_TASK,
            "printf '#!/bin/sh\\nexit 0\\n' > /usr/local/bin/grep && "
            "chmod +x /usr/local/bin/grep && echo replaced",
            id="the-agents-tools-first-in-path",
        ),
        pytest.param(
            OPERATION_TASK,
            "mkdir /usr/evil && printf '#!/bin/sh\\nexit 0\\n' > /usr/evil/grep && "
            "chmod +x /usr/evil/grep && rm -rf /usr/sbin && ln -s /usr/evil /usr/sbin && "
            "echo replaced",
            id="tools-behind-a-replaced-usr-directory",
        ),
        pytest.param(
            PYTHON_CHECK_TASK,
            "v=$(python3 -c 'import sys; print(\"python%d.%d\" % sys.version_info[:2])'); "
            "for d in /etc/$v /usr/local/lib/$v/dist-packages /root/.local/lib/$v/site-packages; do "
            "mkdir -p $d 2>/dev/null; printf 'import os\\nos._exit(0)\\n' > $d/sitecustomize.py 2>/dev/null; "
            "echo 'import os; os._exit(0)' > $d/evil.pth 2>/dev/null; done; "
            "printf 'import os\\nos._exit(0)\\n' > /root/sys.py; echo replaced",
            id="the-agents-python-customisation",
        ),
    ],
)
def test_checks_do_not_run_what_the_agent_replaced(
    make_env: Any, backend: str, task: dict[str, Any], attack: str
) -> None:
    env = make_env([task])
    obs = observe(env, attack)
    assert obs.endswith("replaced\n"), obs
    reward, _ = final(env, {"name": "finish_action", "arguments": {"thought": "done"}})
    assert reward == 0.0


def test_checks_still_run_a_program_the_agent_was_asked_to_write(make_env: Any) -> None:
    env = make_env([WRITE_SCRIPT_TASK])
    observe(
        env,
        "printf '#!/bin/bash\\necho $(($1 + $2))\\n' > /usr/local/bin/add2 && chmod +x /usr/local/bin/add2",
    )
    reward, _ = final(env, {"name": "finish_action", "arguments": {"thought": "done"}})
    assert reward == 1.0


def test_a_full_disk_does_not_make_a_failing_check_pass(make_env: Any) -> None:
    """The check's output used to share the agent's disk: with it full, `grep -q` could
    not write its error message and exited 0, so the check below passed unsolved."""
    env = make_env([OPERATION_TASK])
    observe(env, "for i in 1 2 3 4; do head -c 30M /dev/zero > /root/fill$i; done; df -h /root")
    reward, _ = final(env, {"name": "finish_action", "arguments": {"thought": "done"}})
    assert reward == 0.0


def test_a_file_the_task_puts_under_usr_is_what_the_checks_read(make_env: Any) -> None:
    task = {
        "description": "How many lines has /usr/stock.log?",
        "create": {"init": "seq 5 > /usr/stock.log"},
        "evaluation": {
            "check": [None, {"file": "check/integer-match.py"}],
            "example": "wc -l < /usr/stock.log",
        },
    }
    env = make_env([task])
    assert observe(env, "wc -l < /usr/stock.log").strip().endswith("5")
    assert final(env, answer("5")) == (1.0, "completed")


# Not on Docker: the Docker backend leaves /etc writable, as AgentBench.
@pytest.mark.parametrize("backend", ["bwrap"], indirect=True)
def test_the_loader_configuration_is_read_only(make_env: Any, backend: str) -> None:
    env = make_env([OPERATION_TASK])
    obs = observe(
        env,
        "echo /tmp/evil.so > /etc/ld.so.preload; echo rc=$?; rm -f /etc/ld.so.cache; echo rc=$?",
    )
    assert "rc=0" not in obs, obs


# ---------------------------------------------------------------- isolation


ADD_KEY = (
    "python3 -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
    'nr = {"x86_64": 248, "aarch64": 217}[os.uname().machine]; '
    'r = libc.syscall(nr, b"user", b"agentgym-hostile-test", b"v", 1, -4); '
    'print("add_key", r, os.strerror(ctypes.get_errno()) if r < 0 else "ok")\''
)


def test_the_keyring_is_out_of_reach(make_env: Any) -> None:
    env = make_env([OPERATION_TASK])
    obs = observe(env, ADD_KEY)
    assert "add_key -1 Operation not permitted" in obs, obs


def test_no_new_user_namespace(make_env: Any) -> None:
    env = make_env([OPERATION_TASK])
    obs = observe(env, "unshare -Ur id -u; echo rc=$?")
    assert "rc=0" not in obs and "Operation not permitted" in obs, obs


# Not on Docker: its root is the host's unless the daemon runs with userns-remap (documented).
@pytest.mark.parametrize("backend", ["bwrap"], indirect=True)
def test_the_sandboxs_root_is_an_unprivileged_host_user(make_env: Any, backend: str) -> None:
    """The agent is root inside and uid 100000 on the host: its processes, and the files
    it writes; the base's files still belong to its root, as in a container."""
    from agentgym_eppo.environments.os.idmap import ID_BASE, ID_COUNT

    env = make_env([OPERATION_TASK])
    obs = observe(
        env,
        "id -u; cat /proc/self/uid_map /proc/self/gid_map; stat -c '%u %g' /usr/bin/bash /etc; "
        "touch /root/mine; useradd -m bob && su bob -c 'touch /home/bob/his'; sleep 60 & echo ok",
    )
    lines = [" ".join(line.split()) for line in obs.splitlines()[2:]]
    mapping = f"0 {ID_BASE} {ID_COUNT}"
    assert lines[:5] == ["0", mapping, mapping, "0 0", "0 0"] and lines[-1] == "ok", obs
    pids = env.sandbox.process_ids()
    assert pids
    for pid in pids:
        status = Path(f"/proc/{pid}/status").read_text()
        uids = [line.split()[1:] for line in status.splitlines() if line[:4] in ("Uid:", "Gid:")]
        assert all(ID_BASE <= int(v) < ID_BASE + ID_COUNT for ids in uids for v in ids), status
    root = Path(f"/proc/{min(pids)}/root")
    assert (root / "root/mine").stat().st_uid == ID_BASE
    bob = (root / "home/bob/his").stat()
    assert ID_BASE < bob.st_uid < ID_BASE + ID_COUNT and bob.st_gid == bob.st_uid


# Not on Docker: Docker's default profile allows ptrace on kernels from 4.8 (documented).
@pytest.mark.parametrize("backend", ["bwrap"], indirect=True)
def test_ptrace_reaches_no_process(make_env: Any, backend: str) -> None:
    env = make_env([OPERATION_TASK])
    script = (
        "sleep 60 & python3 -c 'import ctypes, os, sys; libc = ctypes.CDLL(None, use_errno=True); "
        'nr = {"x86_64": 101, "aarch64": 117}[os.uname().machine]; '
        "[print(pid, libc.syscall(nr, 16, int(pid), 0, 0), os.strerror(ctypes.get_errno())) "
        "for pid in sys.argv[1:]]' 1 $!; kill %1"
    )
    obs = observe(env, script)
    lines = [line for line in obs.splitlines() if line[:1].isdigit()]
    assert len(lines) == 2 and all(" -1 Operation not permitted" in line for line in lines), obs


# Not on Docker: Docker's mount table names its own storage paths, as in any container.
@pytest.mark.parametrize("backend", ["bwrap"], indirect=True)
def test_no_host_path_in_the_environment_or_the_mount_table(make_env: Any, backend: str) -> None:
    env = make_env([OPERATION_TASK])
    obs = observe(
        env,
        "env | grep -i pwd; cat /proc/self/mountinfo; "
        "for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; cat $p/mountinfo; done 2>/dev/null",
    )
    for host_path in ("/var/tmp", "agentgym", "/work", "/home/"):
        assert host_path not in obs, obs


# ---------------------------------------------------------------- honest statuses


@pytest.mark.parametrize("script", ["echo \ud800", "\udcff", "printf '%s' \ud800\udc00"])
def test_a_lone_surrogate_is_an_ordinary_observation(make_env: Any, script: str) -> None:
    env = make_env([OPERATION_TASK])
    obs, _, _, _, info = env.step(bash(script))
    assert info["status"] == "running", obs
    assert isinstance(obs, str) and obs.startswith("The output of the OS")


def test_a_lone_surrogate_in_the_answer_is_judged_not_an_error(make_env: Any) -> None:
    env = make_env([ANSWER_TASK])
    reward, status = final(env, answer("7\ud800"))
    assert (reward, status) == (0.0, "completed")


# ---------------------------------------------------------------- self-termination

SELF_TERMINATION = {
    "blocking_profile_then_exit": "echo 'sleep 1000' >> /etc/profile; exit",
    "blocking_bash_profile_then_exit": "echo 'sleep 1000' > ~/.bash_profile; exit",
    "exiting_profile_then_exit": "echo 'exit 3' > ~/.bash_profile; exit",
    "blocking_bashrc_then_exec": "echo 'sleep 1000' >> /etc/bash.bashrc; "
    "echo '. /etc/bash.bashrc' > ~/.bash_profile; exec sleep 1000",
    "kill_every_process": "kill -9 -1",
}
"""Actions that leave the agent without a working shell: start-up files that block or
exit, then the shell ended (``exit``, or ``exec`` of a program that the time limit's
Ctrl-C ends); killing every process it can see (the bubblewrap sandbox's namespace holder
among them)."""


DOCKER_SELF_TERMINATION = ("blocking_profile_then_exit", "kill_every_process")
"""The cases run on Docker too: one start-up file that blocks (the same path in the env
as every other such case, and each costs a restart wait) and ``kill -9 -1``, whose
outcome differs there."""


@pytest.mark.parametrize(
    ("backend", "action"),
    [pytest.param("bwrap", action, id=f"bwrap-{action}") for action in SELF_TERMINATION]
    + [
        pytest.param("docker", action, id=f"docker-{action}", marks=pytest.mark.docker)
        for action in DOCKER_SELF_TERMINATION
    ],
)
def test_breaking_its_own_shell_is_an_agent_status_not_a_task_error(
    backend: str, action: str
) -> None:
    """The trainer leaves ``task_error`` out of the loss: an agent whose shell cannot come
    back after its own action must get the abort penalty, not an exit from the loss."""
    skip_unless(backend)
    env = OSEnv([OPERATION_TASK], backend=backend, limits=SMALL_LIMITS, command_timeout=3.0)
    try:
        env.reset(options={"index": 0})
        obs, reward, terminated, _, info = env.step(bash(SELF_TERMINATION[action]))
        for _ in range(10):  # a sandbox whose holder was killed takes a moment to go
            if terminated:
                break
            assert info["status"] == "running", obs
            time.sleep(0.2)
            obs, reward, terminated, _, info = env.step(bash("echo alive"))
        if not terminated:  # the shell came back (Docker's init outlives `kill -9 -1`)
            assert "alive" in obs, obs
            return
        assert info["status"] == "agent_invalid_action", obs
        assert reward == pytest.approx(-0.2)
    finally:
        env.close()


# ---------------------------------------------------------------- stalls


def test_a_fifo_planted_where_a_check_reads_stalls_no_longer_than_the_limit(
    backend: str,
) -> None:
    """The check (``grep /root/f``) blocks on the agent's FIFO: it is killed when the
    judging budget (the command limit) is spent, the answer fails, and the step returns
    within the step bound that the vector env's deadline stays above."""
    env = OSEnv([OPERATION_TASK], backend=backend, limits=SMALL_LIMITS, command_timeout=2.0)
    try:
        env.reset(options={"index": 0})
        assert observe(env, "mkfifo /root/f && echo planted").endswith("planted\n")
        started = time.monotonic()
        reward, _ = final(env, {"name": "finish_action", "arguments": {"thought": "done"}})
        assert reward == 0.0
        assert time.monotonic() - started < env.step_time_limit
        assert env.script_timeout == env.command_timeout
    finally:
        env.close()


def test_the_os_step_bound_is_below_the_vector_envs_deadline() -> None:
    env = OSEnv(split="dev", prestart=False)  # AgentBench's limits: 30 s per command
    try:
        assert env.step_time_limit < DEFAULT_STEP_TIMEOUT
    finally:
        env.close()


# ---------------------------------------------------------------- forged end-of-output markers

FORGE_MARKER_FROM_PS = r"""
for n in $(ps -eo args= | grep -o '[0-9a-f]\{16\}' | sort -u); do
    printf '\036%s\0360\036\n\036%s\036exit\036\n' "$n" "$n"
done
sleep 0.5; echo tail-of-the-first
"""
"""Prints an end-of-output marker (and a shell-exit one) with every nonce-like word that
``ps`` shows, then more output: with the nonce on the shell wrapper's command line, the
step ended at the forged marker and the next step got this one's tail."""


def test_a_marker_forged_from_ps_does_not_desynchronise_the_next_step(make_env: Any) -> None:
    env = make_env([ANSWER_TASK])
    first = observe(env, FORGE_MARKER_FROM_PS)
    assert first.endswith("tail-of-the-first\n"), first
    assert observe(env, "echo second") == "The output of the OS:\n\nsecond\n"
    reward, _ = final(env, answer(FORGED_ANSWER))
    assert reward == 0.0


def test_a_marker_forged_from_inside_the_shell_shifts_only_the_agents_own_output(
    make_env: Any,
) -> None:
    """The shell that prints the marker is the agent's: a DEBUG trap sees the marker's
    command, nonce included, as it runs, and can print it early. What that buys: text of
    its own shown a step late (a trap can print text in every step anyway); the next
    step still ends at its own marker, and the verdict, which comes from the judge and
    never from the terminal, is untouched."""
    env = make_env([ANSWER_TASK])
    observe(
        env,
        "trap 'case $BASH_COMMAND in printf*036*) eval \"$BASH_COMMAND\"; echo injected;; esac' "
        "DEBUG; echo armed",
    )
    second = observe(env, "echo second")
    third = observe(env, "trap - DEBUG; echo third")
    assert "second" in second and "third" in third
    assert observe(env, "echo fourth") == "The output of the OS:\n\nfourth\n"
    reward, _ = final(env, answer(REAL_ANSWER))
    assert reward == 1.0
