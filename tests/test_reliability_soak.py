"""A short soak (issue 10): a few hundred episodes of every task that has landed, in one
MultiTaskVectorEnv, with a random-but-valid policy and 10% garbage actions, then nothing
of theirs is left: no process, sandbox, mount, cgroup, temp file, file descriptor,
database or database user. The 10,000-episode run with its memory figures is
``python -m benchmarks.bench_reliability soak`` (``benchmarks/reliability.md``).
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from agentgym_eppo.core import Status
from benchmarks.fuzz_tools import env_class
from benchmarks.soak import ALL_TASKS, MARIADB_URL, RESOURCE_TRACKER, run_soak

EPISODES = 300


def _landed() -> list[str]:
    tasks = []
    for task in ALL_TASKS:
        try:
            env_class(task)
        except ImportError:
            continue
        tasks.append(task)
    return tasks


def _mariadb_or_none() -> str | None:
    engine = sa.create_engine(MARIADB_URL, connect_args={"connect_timeout": 3})
    try:
        with engine.connect():
            return MARIADB_URL
    except sa.exc.OperationalError:
        return None
    finally:
        engine.dispose()


@pytest.mark.slow
def test_a_few_hundred_episodes_of_every_task_leave_nothing_behind() -> None:
    tasks = _landed()
    # The random policy runs observation words as bash ("cat", "python3"), which wait on
    # the terminal until the command timeout: 3 s instead of 30 keeps OS episodes short,
    # and the run goes on until every task has ended at least one episode.
    report = run_soak(
        EPISODES,
        tasks=tasks,
        slots_per_task=1,
        db_url=_mariadb_or_none(),
        sample_every=50,
        env_kwargs={"os": {"command_timeout": 3.0}},
        min_episodes_per_task=1,
    )
    assert report.episodes >= EPISODES  # several may end in the last collected batch
    assert report.worker_restarts == 0
    assert report.garbage_actions > 0
    assert set(report.statuses) == set(tasks)
    documented = {status.value for status in Status} - {"running"}
    for task, counts in report.statuses.items():
        assert set(counts) <= documented, task
        assert sum(counts.values()) > 0, f"no {task} episode ended"
    assert report.leaked == {
        "processes": 0,
        "sandboxes": 0,
        "mounts": 0,
        "cgroups": 0,
        "temp_entries": 0,
        "fds": 0,
        "databases": 0,
        "db_users": 0,
    }, f"left behind: {report.leaked}; processes: {report.leftover_processes}"
    assert all(RESOURCE_TRACKER in line for line in report.leftover_processes)
