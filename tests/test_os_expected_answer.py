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
example in the agent's shell: the true answer, which the attack may not beat. One
episode per task takes both attacks: ``""`` is judged as the environment judges an
answer, then ``0`` is sent as the agent's answer. The shipped splits' attacks are
played in the episodes of the expert sweep that ``test_os_assets.py`` shares
(``os_sweeps``), after the expert's answer is judged. Check-script tasks (operation
tasks: what the agent did is what their check reads) are left to their checks: killing
every process legitimately solves "stop the process".
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from support.os_backends import BACKENDS, skip_unless
from support.os_sweeps import (
    SAMPLED,
    Attack,
    attack_task,
    attacked,
    bash,
    judged_by_example_or_match,
    sweep,
)

from agentgym_eppo.environments.os.checkers import STANDARD_CHECKERS
from agentgym_eppo.environments.os.env import OSEnv
from agentgym_eppo.environments.os.tasks import OSTask, StandardCheck, load_tasks


def earned(task: OSTask, attack: str, truth: str | None) -> bool:
    """Whether ``attack`` is a right answer on the untouched machine (then scoring is no
    fault): the fixed answer, or the task's own checkers run on the true output."""
    if task.match is not None:
        return (attack.strip() if task.match.strip else attack) == task.match.answer
    checkers = [step for step in task.check if isinstance(step, StandardCheck)]
    return truth is not None and all(
        STANDARD_CHECKERS[step.name]([attack, truth]) for step in checkers
    )


def unearned(task: OSTask, attack: Attack) -> list[str]:
    """The attacks that scored where they are not the true answer."""
    assert attack.tamper_status == "running" and "tampered" in attack.tamper_observation
    assert attack.answer_terminated and attack.answer_status == "completed"
    return [
        f"{task.sample_id}: answered {text!r} after tampering and scored (truth {attack.truth!r})"
        for text, reward in attack.rewards.items()
        if reward == 1.0 and not earned(task, text, attack.truth)
    ]


def attack_every_task(make_env: Any, indices: list[int], workers: int = 2) -> list[str]:
    """Attack every task at ``indices``; return the scores that were not earned. One env
    per worker thread (a sandbox must not outlive the thread that started it)."""

    def run(part: list[int]) -> list[str]:
        env = make_env()
        try:
            return [
                failure
                for index in part
                for failure in unearned(env.task_set.by_index(index), attack_task(env, index))
            ]
        finally:
            env.close()

    with ThreadPoolExecutor(workers) as pool:
        parts = pool.map(run, [indices[start::workers] for start in range(workers)])
    return [failure for part in parts for failure in part]


def example_or_match_indices(tasks: Any) -> list[int]:
    return [i for i in range(len(tasks)) if judged_by_example_or_match(tasks[i])]


@pytest.mark.slow
@pytest.mark.parametrize("split", ["dev", "test", "train"])
def test_tampering_then_answering_zero_or_nothing_never_scores_on_shipped_tasks(
    split: str,
) -> None:
    """Read from the sweep that ``test_os_assets.py`` shares (``os_sweeps``)."""
    skip_unless("bwrap")
    tasks = load_tasks(None, split)
    played = {task.index: task.attack for task in sweep(split).played if task.attack is not None}
    indices = [i for i in example_or_match_indices(tasks) if attacked(split, i, tasks[i])]
    assert sorted(played) == indices
    assert len(indices) >= 13 * len(SAMPLED.get(split, tasks)) // 19  # every answer template
    assert [failure for i in indices for failure in unearned(tasks[i], played[i])] == []


@pytest.mark.slow
def test_tampering_then_answering_zero_or_nothing_never_scores_on_agentbench_dev(
    agentbench_data: Path,
) -> None:
    skip_unless("bwrap")
    folder = agentbench_data / "os_interaction"
    tasks = load_tasks(folder / "dev.json", "dev", scripts_dir=folder / "scripts" / "dev")
    indices = example_or_match_indices(tasks)
    assert len(indices) == 24  # all but the two "calc" tasks, whose check runs calc

    def make() -> OSEnv:
        return OSEnv(
            folder / "dev.json", command_timeout=10.0, scripts_dir=folder / "scripts" / "dev"
        )

    assert attack_every_task(make, indices) == []


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
        assert unearned(env.task_set.by_index(0), attack_task(env, 0)) == []
        # the true answer still scores after the files are gone
        env.reset(options={"index": 0})
        env.step(bash("rm -rf /root/data"))
        _, reward, _, _, _ = env.step({"name": "answer_action", "arguments": {"answer": "3"}})
        assert reward == 1.0
    finally:
        env.close()
