"""The expected answer of an answer task comes from the state the episode started in.

The attack: empty every place the task's files could be (keeping the folders), clear the
user and group tables, kill every process but the shell, then answer ``0`` or the empty
string. While the judge ran the task's example over the agent's leftovers, that scored
1.0 on about a fifth of the shipped dev tasks and on AgentBench's own counting tasks.
Now the example runs when the episode starts, so the attack scores only where ``0`` (or
``""``) is the true answer.

Every task of the dev split and of AgentBench's dev file whose verdict compares with
its example (or a fixed answer) is swept, and a sample of test and train: the first 38
tasks of each, two of each of the generator's 19 templates (a full sweep of test takes
about a minute on the shared 2-core machine). Before the attack the test runs the
example in the agent's shell: the true answer, which the attack may not beat. Check-script tasks
(operation tasks: what the agent did is what their check reads) are left to their
checks: killing every process legitimately solves "stop the process".
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from os_backends import BACKENDS, skip_unless

from agentgym_eppo.environments.os import expert
from agentgym_eppo.environments.os.checkers import STANDARD_CHECKERS
from agentgym_eppo.environments.os.env import OSEnv
from agentgym_eppo.environments.os.tasks import OSTask, StandardCheck, load_tasks

TAMPER = r"""
for place in /root /home /srv /opt /data /var/log /var/logs /tmp /usr/stock.log; do
    find "$place" -mindepth 1 ! -type d -delete 2>/dev/null
done
: > /etc/passwd; : > /etc/group
keep=" 1 "; p=$$
while [ "${p:-0}" -gt 1 ]; do keep+="$p "; p=$(cut -d' ' -f4 "/proc/$p/stat"); done
for q in /proc/[0-9]*; do
    q=${q#/proc/}
    case $keep in *" $q "*) continue ;; esac
    [ "$(cut -d' ' -f4 "/proc/$q/stat" 2>/dev/null)" = 1 ] || kill -9 "$q" 2>/dev/null
done
echo tampered
"""
"""Empties every writable place a task's files live in (the folders stay, so ``ls`` and
``find`` print nothing rather than an error), clears ``/etc/passwd`` and ``/etc/group``,
and kills every process but the shell, its ancestors, the sandbox's pid 1 and its
children (bubblewrap's namespace holder: killing it ends the sandbox, which is another
attack, ``tests/test_hostile_os.py``)."""

ATTACKS = ("0", "")
SAMPLED = {"test": range(38), "train": range(38)}
"""Splits swept on a sample (their first tasks, two of each template); dev is swept whole."""


def bash(script: str) -> dict[str, Any]:
    return {"name": "bash_action", "arguments": {"script": script}}


def attack_is_the_truth(task: OSTask, attack: str, truth: str) -> bool:
    """Whether ``attack`` is a right answer on the untouched machine (then scoring is
    no fault): the task's own checkers, run on the true output."""
    checkers = [step for step in task.check if isinstance(step, StandardCheck)]
    return all(STANDARD_CHECKERS[step.name]([attack, truth]) for step in checkers)


def tamper_then_answer(env: OSEnv, index: int, attack: str) -> str | None:
    """None when the attack on task ``index`` scores only where it is the true answer."""
    env.reset(options={"index": index})
    task = env.record
    truth = None
    if task.match is None:
        command = expert.example_command(task)
        assert command is not None
        obs, _, _, _, _ = env.step(bash(command))
        truth = env._last_output
    obs, _, _, _, info = env.step(bash(TAMPER))
    assert info["status"] == "running" and "tampered" in obs, obs
    _, reward, terminated, _, info = env.step(
        {"name": "answer_action", "arguments": {"answer": attack}}
    )
    assert terminated and info["status"] == "completed", info
    if reward != 1.0:
        return None
    if task.match is not None:
        text = attack.strip() if task.match.strip else attack
        if text == task.match.answer:
            return None
    elif truth is not None and attack_is_the_truth(task, attack, truth):
        return None
    return f"{task.sample_id}: answered {attack!r} after tampering and scored (truth {truth!r})"


def sweep(make_env: Any, indices: list[int], workers: int = 2) -> list[str]:
    """Attack every task at ``indices`` with each of :data:`ATTACKS`; return the scores
    that were not earned. One env per worker thread (a sandbox must not outlive the
    thread that started it)."""

    def run(part: list[int]) -> list[str]:
        env = make_env()
        try:
            return [
                failure
                for index in part
                for attack in ATTACKS
                if (failure := tamper_then_answer(env, index, attack)) is not None
            ]
        finally:
            env.close()

    with ThreadPoolExecutor(workers) as pool:
        parts = pool.map(run, [indices[start::workers] for start in range(workers)])
    return [failure for part in parts for failure in part]


def judged_by_example_or_match(tasks: Any) -> list[int]:
    """Tasks judged by a fixed answer or against their example's output (a null step)."""
    return [i for i in range(len(tasks)) if tasks[i].match is not None or None in tasks[i].check]


@pytest.mark.slow
@pytest.mark.parametrize("split", ["dev", "test", "train"])
def test_tampering_then_answering_zero_or_nothing_never_scores_on_shipped_tasks(
    split: str,
) -> None:
    skip_unless("bwrap")
    tasks = load_tasks(None, split)
    indices = judged_by_example_or_match(tasks)
    if split in SAMPLED:
        indices = [i for i in indices if i in SAMPLED[split]]
    assert len(indices) >= 13 * len(SAMPLED.get(split, tasks)) // 19  # every answer template
    failures = sweep(lambda: OSEnv(split=split, command_timeout=10.0), indices)
    assert failures == []


@pytest.mark.slow
def test_tampering_then_answering_zero_or_nothing_never_scores_on_agentbench_dev(
    agentbench_data: Path,
) -> None:
    skip_unless("bwrap")
    folder = agentbench_data / "os_interaction"
    tasks = load_tasks(folder / "dev.json", "dev", scripts_dir=folder / "scripts" / "dev")
    indices = judged_by_example_or_match(tasks)
    assert len(indices) == 24  # all but the two "calc" tasks, whose check runs calc

    def make() -> OSEnv:
        return OSEnv(
            folder / "dev.json", command_timeout=10.0, scripts_dir=folder / "scripts" / "dev"
        )

    assert sweep(make, indices) == []


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    skip_unless(request.param)
    yield str(request.param)


COUNT_TASK = {
    "description": "How many files are in /root/data?",
    "create": {"init": "mkdir -p /root/data && touch /root/data/a /root/data/b /root/data/c"},
    "evaluation": {
        "check": [None, {"language": "python", "file": "check/integer-match.py"}],
        "example": "ls /root/data | wc -l",
    },
}


def test_the_expected_answer_is_taken_before_the_agent_acts_on_every_backend(
    backend: str,
) -> None:
    env = OSEnv([COUNT_TASK], backend=backend, command_timeout=10.0)
    try:
        assert tamper_then_answer(env, 0, "0") is None
        # the true answer still scores after the files are gone
        env.reset(options={"index": 0})
        env.step(bash("rm -rf /root/data"))
        _, reward, _, _, _ = env.step({"name": "answer_action", "arguments": {"answer": "3"}})
        assert reward == 1.0
    finally:
        env.close()
