"""One sweep of a shipped OS split, played once per test session and read by two test
files: ``test_os_assets.py`` (the expert solves every task and the empty answer fails)
and ``test_os_expected_answer.py`` (tampering, then answering ``0`` or ``""``, never
scores where that is not the true answer).

Each task is one episode: the empty answer judged at the start, a no-op command, then
the expert. A task that the tamper test attacks (:func:`attacked`) goes on in the same
episode: the expert's first command is its example, whose output is the true answer; its
answer is judged, the tamper script runs (:data:`TAMPER`), ``""`` is judged and ``0`` is
sent as the agent's answer. Every other task ends with the expert's answer sent as the
agent's. Playing both files' episodes for a task once saves a sandbox start and the
example's run per attacked task and attack.

The blind sweep (:func:`blind_sweep`, read by ``test_os_expected_answer.py``) plays
episodes of its own: a blind policy changes the machine, so no expert can follow it.
"""

from __future__ import annotations

import functools
import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from agentgym_eppo.environments.os import expert
from agentgym_eppo.environments.os.env import OSEnv
from agentgym_eppo.environments.os.evaluation import judge
from agentgym_eppo.environments.os.sandbox import SandboxError
from agentgym_eppo.environments.os.tasks import OSTask, load_tasks
from support.os_calls import answer, bash

KILL_EVERY_PROCESS = r"""
keep=" 1 "; p=$$
while [ "${p:-0}" -gt 1 ]; do keep+="$p "; p=$(cut -d' ' -f4 "/proc/$p/stat"); done
for q in /proc/[0-9]*; do
    q=${q#/proc/}
    case $keep in *" $q "*) continue ;; esac
    [ "$(cut -d' ' -f4 "/proc/$q/stat" 2>/dev/null)" = 1 ] || kill -9 "$q" 2>/dev/null
done
"""
"""Kills every process but the shell, its ancestors, the sandbox's pid 1 and its children
(bubblewrap's namespace holder: killing it ends the sandbox, which is another attack,
``tests/test_os_hostile.py``)."""

TAMPER = (
    r"""
for place in /root /home /srv /opt /data /var/log /var/logs /tmp /usr/stock.log; do
    find "$place" -mindepth 1 ! -type d -delete 2>/dev/null
done
: > /etc/passwd; : > /etc/group"""
    + KILL_EVERY_PROCESS
    + "echo tampered\n"
)
"""Empties every writable place a task's files live in (the folders stay, so ``ls`` and
``find`` print nothing rather than an error), clears ``/etc/passwd`` and ``/etc/group``,
and :data:`KILL_EVERY_PROCESS`."""

ATTACKS = ("0", "")
"""The answers sent after tampering: the first as the agent's answer, the second judged."""

SAMPLED = {"test": range(38), "train": range(38)}
"""Splits attacked on a sample (their first tasks, two of each of the generator's 19
templates); dev is attacked whole."""

RANDOM_COMMANDS = (
    "ls -la",
    "pwd",
    "cd /tmp",
    "cd /var/log",
    "cd ..",
    "echo hello",
    "cat /etc/hostname",
    "whoami",
    "ls /root | head -3",
    "x=3; echo $x",
    "true",
    "false",
    "wc -l /etc/passwd",
    "mkdir -p /tmp/scratch && cd /tmp/scratch",
)
"""Valid commands an agent may run before handing over to the expert (no changes to the
task's own files)."""


def judged_by_example_or_match(task: OSTask) -> bool:
    """Whether ``task`` is judged by a fixed answer or against its example's output (a
    null step): the tasks the tamper test attacks."""
    return task.match is not None or None in task.check


def attacked(split: str, index: int, task: OSTask) -> bool:
    """Whether the sweep of ``split`` attacks its task at ``index``."""
    return judged_by_example_or_match(task) and index in SAMPLED.get(split, range(index + 1))


@dataclass(frozen=True)
class Attack:
    """What tampering, then answering, did on one task."""

    truth: str | None
    """The example's output in the agent's shell before the attack (None for a fixed answer)."""
    tamper_observation: str
    tamper_status: str
    rewards: dict[str, float]
    """Each of :data:`ATTACKS` and what it scored."""
    answer_terminated: bool
    answer_status: str
    """Whether the episode ended, and its status, after the agent's answer ``0``."""


@dataclass(frozen=True)
class Played:
    """One task of a sweep: ``failure`` is None when the expert solved it and the empty
    answer failed, else (sample id, whether the empty answer passed, last observation)."""

    index: int
    failure: tuple[str, bool, str] | None
    attack: Attack | None


def tamper_and_answer(env: OSEnv, truth: str | None) -> Attack:
    """Tamper with the running episode's machine, judge ``""`` and answer ``0`` (see
    :data:`ATTACKS`); ``truth`` is what the example printed in the agent's shell."""
    assert env.sandbox is not None
    observation, _, _, _, info = env.step(bash(TAMPER))
    tamper_status = info["status"]
    first, *rest = ATTACKS
    rewards = {
        attack: float(
            judge(
                env.record,
                attack,
                env.sandbox,
                expected=env._expected,  # the expected answer the episode's start took
                time_limit=env.script_timeout,
            )
        )
        for attack in rest
    }
    _, reward, terminated, _, info = env.step(answer(first))
    rewards[first] = reward
    return Attack(truth, observation, tamper_status, rewards, terminated, info["status"])


def attack_task(env: OSEnv, index: int) -> Attack:
    """One episode of task ``index``: its example run in the agent's shell (the true
    answer, unless the task has a fixed one), then :func:`tamper_and_answer`."""
    env.reset(options={"index": index})
    truth = None
    if env.record.match is None:
        command = expert.example_command(env.record)
        assert command is not None
        env.step(bash(command))
        truth = env._last_output
    return tamper_and_answer(env, truth)


def _play(env: OSEnv, split: str, index: int, warmup: int) -> Played:
    """One episode of task ``index`` (see the module docstring)."""
    try:
        env.reset(options={"index": index})
    except SandboxError as error:
        return Played(index, (str(index), False, f"sandbox did not start: {error}"), None)
    assert env.sandbox is not None
    empty_passes = False
    if not warmup:
        empty_passes = judge(
            env.record,
            "",
            env.sandbox,
            expected=env._expected,  # the expected answer the episode's start took
            time_limit=env.script_timeout,
        )
        # A check stops the agent's processes while it runs, and the shell then reports
        # its background jobs as "Stopped" before its next prompt: the expert's
        # `pgrep -xc` answer read "[1] Stopped ...\n3" about one time in 30. An episode
        # is judged after its last turn, so only this early judge exposes the notices;
        # a no-op command takes them.
        env.sandbox.run_command("true", env.command_timeout)
    rng = random.Random(index)
    for script in rng.choices(RANDOM_COMMANDS, k=warmup):
        env.step(bash(script))
    attack = None
    while True:
        action = env.expert_action()
        if action["name"] == "answer_action" and not warmup and attacked(split, index, env.record):
            truth = env._last_output if env.record.match is None else None
            solved = judge(
                env.record,
                action["arguments"]["answer"],
                env.sandbox,
                expected=env._expected,
                time_limit=env.script_timeout,
            )
            observation = "Correct." if solved else "Wrong."
            attack = tamper_and_answer(env, truth)
            break
        observation, reward, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            solved = reward == 1.0
            break
    failure = (
        None if solved and not empty_passes else (env.record.sample_id, empty_passes, observation)
    )
    return Played(index, failure, attack)


@dataclass(frozen=True)
class Sweep:
    """Every task of a split played (see the module docstring)."""

    played: list[Played]
    retried: list[tuple[int, object]]
    """Tasks whose first episode failed and that were played again (a race, not an
    unsolvable task, when the second passes)."""

    @property
    def failures(self) -> list[tuple[str, bool, str]]:
        return [task.failure for task in self.played if task.failure is not None]


def _play_part(split: str, indices: range, warmup: int, retried: list[Any]) -> list[Played]:
    """Play the tasks at ``indices``; one environment, made and closed in this thread (a
    bubblewrap sandbox must not outlive the thread that started it)."""
    env = OSEnv(split=split, command_timeout=10.0)
    played = []
    try:
        for index in indices:
            first = _play(env, split, index, warmup)
            if first.failure is not None:
                # A task that fails once and then passes is a race, not an unsolvable task:
                # about one episode in several hundred failed so (a sandbox that fails to
                # start is set up again by OSEnv itself; a failure after the start is not).
                # Counted, bounded, retried once.
                retried.append((index, first.failure))
                first = _play(env, split, index, warmup)
            played.append(first)
    finally:
        env.close()
    return played


def sweep(split: str, warmup: int = 0) -> Sweep:
    """Play every task of the shipped ``split`` (after ``warmup`` random commands) in two
    threads, once per session whichever test asks first."""
    return _sweep(split, warmup)


@functools.cache
def _sweep(split: str, warmup: int, workers: int = 2) -> Sweep:
    size = len(load_tasks(None, split))
    retried: list[tuple[int, object]] = []
    with ThreadPoolExecutor(workers) as pool:
        parts = pool.map(
            lambda start: _play_part(split, range(start, size, workers), warmup, retried),
            range(workers),
        )
        played = sorted((task for part in parts for task in part), key=lambda task: task.index)
    return Sweep(played, retried)


ARCHIVE_EVERYTHING = r"""
cd /root
for dir in /root/*/ /home/*/ /srv/*/ /opt/*/ /data/*/ /tmp/*/ /var/*/; do
    dir=${dir%/}
    [ -d "$dir" ] && tar -czf "/root/${dir##*/}.tar.gz" -C "${dir%/*}" "${dir##*/}" 2>/dev/null
done
tar -czf /tmp/everything.tar.gz -C / root home srv opt data etc 2>/dev/null
echo archived
"""
"""Archives every directory where task files live, each as ``/root/<its name>.tar.gz``
(paths inside starting with ``<its name>/``, as an archive task asks), and all of them
together in ``/tmp/everything.tar.gz``."""

BLIND_POLICIES = {
    "archive everything": ARCHIVE_EVERYTHING,
    "kill every process": KILL_EVERY_PROCESS + "echo killed\n",
}
"""Policies that never read the question, by name: one command, then :data:`BLIND_ANSWER`.
Before the checks of the archive and stop-the-process templates wanted decoys left alone,
each scored on every task of its template."""

BLIND_ANSWER = "done"
"""What a blind policy answers: no answer task's true answer."""

BLIND_SAMPLED = {"test": range(19), "train": range(19)}
"""Splits the blind policies play on a sample (their first tasks, one of each of the
generator's 19 templates); dev is played whole."""


def blind_plays(split: str, index: int, task: OSTask) -> list[tuple[str, ...]]:
    """The episodes the blind sweep of ``split`` plays on its task at ``index``, each the
    policies it runs in turn: one per policy where the check reads the end state, and one
    running both where the verdict is the answer against the expected answer taken at the
    start (whatever a policy did cannot change it)."""
    if index not in BLIND_SAMPLED.get(split, range(index + 1)):
        return []
    if judged_by_example_or_match(task):
        return [tuple(BLIND_POLICIES)]
    return [(policy,) for policy in BLIND_POLICIES]


@dataclass(frozen=True)
class BlindPlay:
    """One episode of blind policies: what each command printed, the verdict on
    :data:`BLIND_ANSWER` and the episode's final status."""

    index: int
    policies: tuple[str, ...]
    observations: tuple[str, ...]
    reward: float
    status: str


def _play_blind(env: OSEnv, index: int, policies: tuple[str, ...]) -> BlindPlay:
    env.reset(options={"index": index})
    observations = []
    for policy in policies:
        observation, _, terminated, truncated, _ = env.step(bash(BLIND_POLICIES[policy]))
        assert not (terminated or truncated), (index, policy, observation)
        observations.append(observation)
    _, reward, _, _, info = env.step(answer(BLIND_ANSWER))
    return BlindPlay(index, policies, tuple(observations), float(reward), info["status"])


def _play_blind_part(split: str, episodes: list[tuple[int, tuple[str, ...]]]) -> list[BlindPlay]:
    """Play ``episodes`` with one environment, made and closed in this thread."""
    env = OSEnv(split=split, command_timeout=10.0)
    played = []
    try:
        for index, policies in episodes:
            try:
                played.append(_play_blind(env, index, policies))
            except SandboxError:  # a sandbox that failed twice to start: a race, once more
                played.append(_play_blind(env, index, policies))
    finally:
        env.close()
    return played


@functools.cache
def blind_sweep(split: str, workers: int = 2) -> list[BlindPlay]:
    """The blind policies on every task of the shipped ``split`` (a sample of test and
    train, :data:`BLIND_SAMPLED`) in two threads, once per session."""
    tasks = load_tasks(None, split)
    episodes = [
        (index, policies)
        for index in range(len(tasks))
        for policies in blind_plays(split, index, tasks[index])
    ]
    with ThreadPoolExecutor(workers) as pool:
        parts = pool.map(
            lambda start: _play_blind_part(split, episodes[start::workers]), range(workers)
        )
        plays = [play for part in parts for play in part]
    return sorted(plays, key=lambda play: episodes.index((play.index, play.policies)))
