"""AgentBench-OS-v0 behaviour, run against every backend available (bubblewrap, Docker)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from support.os_backends import BACKENDS, SMALL_LIMITS, skip_unless
from support.os_calls import answer, bash

import agentgym_eppo  # noqa: F401 - registers the environments
from agentgym_eppo.core import ABORT_PENALTY, TaskFormatError
from agentgym_eppo.environments.os import cgroups
from agentgym_eppo.environments.os.env import AGENTBENCH_TRUNCATION, OSEnv
from agentgym_eppo.environments.os.sandbox import SandboxError

COUNT_TASK = {
    "description": "How many files are in /root/box?",
    "create": {"init": "mkdir /root/box && touch /root/box/a /root/box/b /root/box/c"},
    "evaluation": {
        "check": [None, {"language": "python", "file": "check/integer-match.py"}],
        "example": "ls /root/box | wc -l",
    },
}
MATCH_TASK = {"description": "Say done.", "evaluation": {"match": "done"}}
OPERATION_TASK = {
    "description": "Create /root/flag containing 'up'.",
    "evaluation": {
        "check": [{"code": "grep -qx up /root/flag"}],
        "example": "echo up > /root/flag",
    },
}


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    skip_unless(request.param)
    return str(request.param)


@pytest.fixture
def make_env(backend: str) -> Iterator[Any]:
    envs: list[OSEnv] = []

    def make(tasks: list[Any], **kwargs: Any) -> OSEnv:
        kwargs.setdefault("command_timeout", 2.0)
        env = OSEnv(tasks, backend=backend, limits=SMALL_LIMITS, **kwargs)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


def test_reset_runs_init_and_returns_the_task_text(make_env: Any) -> None:
    env = make_env([COUNT_TASK])
    obs, info = env.reset(options={"index": 0})
    assert (
        obs
        == "Now, I will start a new problem in a new OS. My problem is:\n\n"
        + COUNT_TASK["description"]
    )
    assert (info["task_id"], info["max_turns"], info["turn"]) == ("os", 8, 0)
    assert [tool["function"]["name"] for tool in info["tools"]] == [
        "bash_action",
        "answer_action",
        "finish_action",
    ]
    assert "bash_action" in info["system_prompt"]
    assert env.step(bash("ls /root/box"))[0] == "The output of the OS:\n\na  b  c\n"


def test_shell_state_persists_between_turns(make_env: Any) -> None:
    env = make_env([MATCH_TASK])
    env.reset(options={"index": 0})
    env.step(bash("cd /tmp && export ANSWER=42 && sleep 30 &"))
    env.step(bash("cd /var; GREETING=hello"))
    obs, *_ = env.step(bash('pwd; echo "$GREETING"; jobs | grep -c "sleep 30"'))
    assert obs == "The output of the OS:\n\n/var\nhello\n1\n"


def test_start_command_keeps_running_in_the_background(make_env: Any) -> None:
    task = {**MATCH_TASK, "start": "python3 -c 'import time; time.sleep(60)' & sleep 0.3"}
    env = make_env([task])
    env.reset(options={"index": 0})
    obs, *_ = env.step(bash("pgrep -fc 'time.sleep\\(60\\)'"))
    assert obs == "The output of the OS:\n\n1\n"


def test_long_output_is_cut_the_agentbench_way(make_env: Any) -> None:
    env = make_env([MATCH_TASK])
    env.reset(options={"index": 0})
    full = "".join(f"{n}\n" for n in range(1, 1001))
    obs, *_ = env.step(bash("seq 1 1000"))
    assert obs == "The output of the OS:\n\n" + full[:780] + AGENTBENCH_TRUNCATION


def test_empty_output_and_failing_commands_are_observations(make_env: Any) -> None:
    env = make_env([MATCH_TASK])
    env.reset(options={"index": 0})
    assert env.step(bash("true"))[0] == "The output of the OS is empty."
    obs, reward, terminated, _, info = env.step(bash("ls /nowhere"))
    assert (
        obs == "The output of the OS:\n\nls: cannot access '/nowhere': No such file or directory\n"
    )
    assert (reward, terminated, info["status"]) == (0.0, False, "running")
    obs, *_ = env.step(bash("echo never; 'unclosed"))
    assert obs.startswith(
        "The output of the OS:\n\nbash: unexpected EOF while looking for matching"
    )


def test_command_past_the_timeout_is_interrupted_and_the_shell_goes_on(make_env: Any) -> None:
    env = make_env([MATCH_TASK], command_timeout=1.0)
    env.reset(options={"index": 0})
    env.step(bash("sleep 300 &"))
    # Not interrupted, the command would print "never" after 100 s: the output itself
    # shows the timeout held (no wall-clock bound asserted).
    obs, *_ = env.step(bash("echo before; sleep 100; echo never"))
    assert obs.startswith("The output of the OS:\n\nbefore\n") and "never" not in obs
    assert obs.endswith("\n[the command ran longer than 1 s and was interrupted]")
    assert env.step(bash("jobs | grep -c 'sleep 300'"))[0] == "The output of the OS:\n\n1\n"


def test_expert_solves_a_check_task_and_a_wrong_answer_scores_zero(make_env: Any) -> None:
    env = make_env([COUNT_TASK])
    env.reset(options={"index": 0})
    assert env.expert_action() == bash("ls /root/box | wc -l")
    env.step(env.expert_action())
    assert env.expert_action() == answer("3")
    obs, reward, terminated, truncated, info = env.step(env.expert_action())
    assert (obs, reward, terminated, truncated) == ("Correct.", 1.0, True, False)
    assert (info["status"], info["success"], info["score"]) == ("completed", True, 1.0)
    env.reset(options={"index": 0})
    obs, reward, terminated, _, info = env.step(answer("4"))
    assert (obs, reward, terminated, info["status"], info["success"]) == (
        "Wrong.",
        0.0,
        True,
        "completed",
        False,
    )


def test_finish_action_submits_its_thought_as_the_answer(make_env: Any) -> None:
    env = make_env([MATCH_TASK])
    env.reset(options={"index": 0})
    _, reward, *_ = env.step({"name": "finish_action", "arguments": {"thought": " done \n"}})
    assert reward == 1.0


def test_operation_task_is_checked_in_the_episode_sandbox(make_env: Any) -> None:
    env = make_env([OPERATION_TASK])
    env.reset(options={"index": 0})
    assert env.step(answer(""))[1] == 0.0
    env.reset(options={"index": 0})
    env.step(bash("echo up > /root/flag"))
    assert env.step({"name": "finish_action", "arguments": {"thought": "made it"}})[1] == 1.0


def test_check_scripts_get_the_answer_then_each_output(make_env: Any, tmp_path: Path) -> None:
    (tmp_path / "check").mkdir()
    (tmp_path / "check" / "same.py").write_text(
        "import sys\nsys.exit(0 if sys.argv[1].strip() == sys.argv[2].strip() else 1)\n"
    )
    task = {
        "description": "Who am I?",
        "evaluation": {
            "check": [None, {"language": "python", "file": "check/same.py"}],
            "example": "whoami",
        },
    }
    env = make_env([task], scripts_dir=tmp_path)
    env.reset(options={"index": 0})
    assert env.step(answer("root"))[1] == 1.0
    env.reset(options={"index": 0})
    assert env.step(answer("nobody"))[1] == 0.0


def test_regex_match(make_env: Any) -> None:
    env = make_env([{"description": "d", "evaluation": {"match": {"regex": "^[0-9]+ files?$"}}}])
    env.reset(options={"index": 0})
    assert env.step(answer("12 files"))[1] == 1.0
    env.reset(options={"index": 0})
    assert env.step(answer("twelve files"))[1] == 0.0


def test_turn_limit_truncates_with_abort_penalty(make_env: Any) -> None:
    env = make_env([MATCH_TASK], max_turns=2)
    env.reset(options={"index": 0})
    assert env.step(bash("echo 1"))[2:4] == (False, False)
    obs, reward, terminated, truncated, info = env.step(bash("echo 2"))
    assert (obs, reward, terminated, truncated) == (
        "The output of the OS:\n\n2\n",
        ABORT_PENALTY,
        False,
        True,
    )
    assert info["status"] == "task_limit_reached"
    assert env.sandbox is None


def test_each_episode_gets_a_fresh_machine_and_the_old_one_is_torn_down(make_env: Any) -> None:
    env = make_env([MATCH_TASK])
    env.reset(options={"index": 0})
    env.step(bash("echo secret > /root/leftover; useradd intruder"))
    old = env.sandbox
    assert old is not None and old.process_ids()
    env.step(answer("done"))
    assert env.sandbox is None
    assert not [pid for pid in old.process_ids() if Path(f"/proc/{pid}").exists()]
    env.reset(options={"index": 0})
    obs, *_ = env.step(bash("ls -A1 /root; id intruder"))
    assert obs == "The output of the OS:\n\n.bashrc\n.profile\nid: 'intruder': no such user\n"


def test_init_failure_and_missing_scripts_are_clear_errors(make_env: Any) -> None:
    env = make_env([{**MATCH_TASK, "create": {"init": "echo oops; exit 3"}}])
    with pytest.raises(
        SandboxError, match=r"init script failed with exit code 3 after [0-9.]+ s( \(.*\))?: oops"
    ):
        env.reset(options={"index": 0})
    env = make_env([{**MATCH_TASK, "create": {"init": {"file": "init/x.sh"}}}])
    with pytest.raises(TaskFormatError, match=r"task-00000: 'init/x.sh' needs scripts_dir="):
        env.reset(options={"index": 0})


def test_same_actions_give_the_same_observations(make_env: Any) -> None:
    runs = []
    for _ in range(2):
        env = make_env([COUNT_TASK, MATCH_TASK])
        transcript = [env.reset(seed=5)[0]]
        for action in (bash("ls /root/box; echo $((6*7))"), answer("3")):
            obs, reward, terminated, truncated, info = env.step(action)
            transcript.append((obs, reward, terminated, truncated, info["status"]))
        runs.append(transcript)
    assert runs[0] == runs[1]


def test_bad_backend_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="backend must be 'bwrap' or 'docker', got 'vm'"):
        OSEnv([MATCH_TASK], backend="vm")


def test_gym_make_and_check_env() -> None:
    skip_unless("bwrap")
    env = gym.make("AgentBench-OS-v0", tasks=[MATCH_TASK, COUNT_TASK], command_timeout=2.0)
    try:
        check_env(env.unwrapped, skip_render_check=True)
        _obs, info = env.reset(options={"index": 1})
        assert info["sample_id"] == "task-00001" and env.unwrapped.num_tasks == 2
    finally:
        env.close()


def test_sandboxes_of_a_crashed_process_are_cleaned_up(tmp_path: Path) -> None:
    skip_unless("bwrap")
    script = textwrap.dedent(
        """
        import sys, time
        from agentgym_eppo.environments.os.sandbox_bwrap import BwrapSandbox
        box = BwrapSandbox()
        box.run_command("sleep 600 &", 5)
        print(box._cgroup.paths[0], flush=True)
        time.sleep(600)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert child.stdout is not None
    group = Path(child.stdout.readline().strip())
    assert (group / "cgroup.procs").read_text().split()
    child.send_signal(signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 5
    while (group / "cgroup.procs").read_text().split() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (group / "cgroup.procs").read_text().split() == []  # --die-with-parent took them all
    assert cgroups.remove_leftovers() >= 1
    assert not group.exists()


def test_sandboxes_left_open_are_torn_down_when_python_exits() -> None:
    """A sandbox never closed (kept alive by a global, as a failed test's traceback keeps
    one) is torn down by the exit handler, before the interpreter finalizes."""
    skip_unless("bwrap")
    script = textwrap.dedent(
        """
        from agentgym_eppo.environments.os.sandbox_bwrap import BwrapSandbox
        KEPT = BwrapSandbox()
        KEPT.run_command("sleep 600 &", 5)
        print(KEPT._cgroup.paths[0], flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert done.returncode == 0, done.stderr
    assert not Path(done.stdout.strip()).exists()


def test_docker_containers_of_a_dead_owner_are_removed() -> None:
    skip_unless("docker")
    from agentgym_eppo.environments.os import sandbox_docker

    client = sandbox_docker.docker_client()
    dead = subprocess.Popen(["true"])
    dead.wait()
    container = client.containers.run(
        "local-os/default",
        ["sleep", "infinity"],
        detach=True,
        labels={
            sandbox_docker.LABEL: "1",
            f"{sandbox_docker.LABEL}.owner": f"{os.uname().nodename}:{dead.pid}",
        },
    )
    try:
        assert sandbox_docker.remove_leftovers(client) >= 1
        with pytest.raises(Exception, match=r"404|No such container"):
            client.containers.get(container.id)
    finally:
        with contextlib.suppress(Exception):
            container.remove(force=True)


def test_a_sandbox_started_without_waiting_has_its_shell_up_before_it_is_used() -> None:
    """The reserve sandbox behind a fast reset: its agent's login shell starts as the
    sandbox does, not when the episode first waits on it (the shell's exit nonce reaches
    the wrapper with the start request, not from the terminal)."""
    skip_unless("bwrap")
    from agentgym_eppo.environments.os.sandbox_bwrap import BwrapSandbox

    box = BwrapSandbox(wait=False, limits=SMALL_LIMITS)
    try:
        assert _login_shell(box) is not None
        box.ensure_ready()
        assert box.run_command("echo up", 5).output.strip() == "up"
    finally:
        box.close()


def test_a_first_shell_gone_before_it_answers_is_started_once_more() -> None:
    """Once in a CI run a sandbox's first shell was gone before it answered: no word on the
    terminal, the control loop and the holder fine. No agent command has run at that
    point, so the start tries once more instead of failing the episode. The fault is made
    here by killing the shell and its wrapper as they start."""
    skip_unless("bwrap")
    from agentgym_eppo.environments.os.sandbox_bwrap import BwrapSandbox

    box = BwrapSandbox(wait=False, limits=SMALL_LIMITS, start_timeout=2)
    try:
        shell = _login_shell(box)
        assert shell is not None
        wrapper = int(Path(f"/proc/{shell}/stat").read_text().rsplit(")", 1)[1].split()[1])
        os.kill(wrapper, signal.SIGKILL)  # first: a dead wrapper prints no exit marker
        with contextlib.suppress(ProcessLookupError):  # the hang-up may have ended it
            os.kill(shell, signal.SIGKILL)
        box.ensure_ready()
        assert box.run_command("echo up", 5).output.strip() == "up"
        assert _login_shell(box) not in (None, shell)
    finally:
        box.close()


def _login_shell(box: Any) -> int | None:
    """The pid of the agent's login shell once it runs (waiting up to 20 s), else None."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for pid in box.pids_snapshot():
            with contextlib.suppress(OSError):
                if b"--login" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                    return pid
        time.sleep(0.05)
    return None
