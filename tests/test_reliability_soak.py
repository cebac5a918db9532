"""A short soak: a few hundred episodes of all five tasks, the DB task on
MariaDB, in one MultiTaskVectorEnv, with a random-but-valid policy and 10% garbage
actions, then nothing of theirs is left: no process, sandbox, mount, cgroup, temp file,
file descriptor, database or database user. A missing task or server fails (in CI) rather
than shrinking the soak. The 10,000-episode run with its memory figures is
``python -m benchmarks.bench_reliability soak`` (``benchmarks/results/reliability/figures.md``).
"""

from __future__ import annotations

import pytest
from support.db_servers import MARIADB_URL, server_url

from agentgym_eppo.core import Status
from benchmarks.holdings import RESOURCE_TRACKER
from benchmarks.soak import ALL_TASKS, run_soak

EPISODES = 300


@pytest.mark.slow
def test_a_few_hundred_episodes_of_every_task_leave_nothing_behind() -> None:
    tasks = list(ALL_TASKS)
    # The random policy runs observation words as bash ("cat", "python3"), which wait on
    # the terminal until the command timeout: 3 s instead of 30 keeps OS episodes short,
    # and the run goes on until every task has ended at least one episode.
    report = run_soak(
        EPISODES,
        tasks=tasks,
        slots_per_task=1,
        db_url=server_url(MARIADB_URL),
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
