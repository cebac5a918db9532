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
every process used to solve "stop the process": see the blind policies below.

Blind policies (``os_sweeps.BLIND_POLICIES``): "archive everything" (every directory
where task files live, each as ``/root/<its name>.tar.gz``, and all of them in one more
archive) and "kill every process" (all but the shell), then the answer ``done``. Neither
reads the question; each scored on every task of its template (5 of the 100 dev tasks
each) while those checks accepted the end state a policy reaches without knowing the
task. Played on every dev task and on one task of each template in test and train: one
episode per policy where the check reads the end state, one running both where the
answer is judged against the expected answer taken at the start.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from support.os_backends import BACKENDS, skip_unless
from support.os_calls import bash
from support.os_sweeps import (
    BLIND_POLICIES,
    BLIND_SAMPLED,
    SAMPLED,
    Attack,
    attack_task,
    attacked,
    blind_plays,
    blind_sweep,
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


@pytest.mark.slow
@pytest.mark.parametrize("split", ["dev", "test", "train"])
def test_blind_policies_score_nothing_on_shipped_tasks(split: str) -> None:
    skip_unless("bwrap")
    tasks = load_tasks(None, split)
    played = blind_sweep(split)
    episodes = [(i, p) for i in range(len(tasks)) for p in blind_plays(split, i, tasks[i])]
    assert [(play.index, play.policies) for play in played] == episodes
    indices = {index for index, _ in episodes}
    assert len(indices) == len(BLIND_SAMPLED.get(split, tasks))  # every template
    for play in played:
        assert play.status == "completed", play
        assert [o.split()[-1] for o in play.observations] == [
            BLIND_POLICIES[policy].split()[-1] for policy in play.policies
        ], play
    assert [
        f"{tasks[play.index].sample_id}: {' then '.join(play.policies)} scored"
        for play in played
        if play.reward != 0.0
    ] == []


SHORTCUTS = {
    r"Change the permissions of (\S+) to mode (\d+)": "chmod {1} /root/*",
    r"Create a user named (\S+) with .* the group (\w+)": (
        "useradd -m -G {1} {0} && useradd -m -G {1} {0}x"
    ),
    r"Replace every occurrence of the word '\w+' with '(\w+)' in (\S+)\.$": (
        "printf 'name={0}\\n' > {1}"
    ),
}
"""End states that the question's own words reach without doing its job, by the
description they answer: every file of ``/root`` given the mode; the user and one more
(what creating every name the template draws does); the file replaced by its last line.
The checks accepted each before they wanted the rest left as it was."""


def test_shortcut_end_states_fail_the_checks_of_operation_tasks() -> None:
    skip_unless("bwrap")
    tasks = load_tasks(None, "dev")
    env = OSEnv(split="dev", command_timeout=10.0)
    scored = []
    try:
        for pattern, shortcut in SHORTCUTS.items():
            index, found = next(
                (i, found)
                for i in range(len(tasks))
                if (found := re.match(pattern, tasks[i].description))
            )
            env.reset(options={"index": index})
            _, _, _, _, info = env.step(bash(shortcut.format(*found.groups())))
            assert info["status"] == "running"
            _, reward, _, _, _ = env.step({"name": "answer_action", "arguments": {"answer": ""}})
            if reward:
                scored.append(env.record.sample_id)
    finally:
        env.close()
    assert scored == []


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
