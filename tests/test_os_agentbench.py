"""Every task of AgentBench's ``os_interaction/dev.json`` runs in the sandbox as it is: its
example solution (or the answer its ``match`` implies) scores 1 and a wrong answer 0.

Three tasks reference scripts of AgentBench's ``scripts/dev`` folder (``check/0.sh`` +
``example/0.sh``: the "calc" command tasks; ``init/stock-log.sh``: the stock log task);
``scripts_dir=`` points at that folder beside the task files, so they run like the rest.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.os_backends import skip_unless

from agentgym_eppo.environments.os.env import OSEnv

DEV_TASKS = 26


@pytest.fixture(scope="module")
def dev_env(agentbench_data: Path) -> OSEnv:
    skip_unless("bwrap")
    env = OSEnv(
        agentbench_data / "os_interaction" / "dev.json",
        split="dev",
        command_timeout=10.0,
        scripts_dir=agentbench_data / "os_interaction" / "scripts" / "dev",
    )
    yield env
    env.close()


# dev-00025's init (AgentBench's init/stock-log.sh) writes /usr/stock.log, which the
# example then reads: the judge view shows the agent's own /usr files under the base's
# directories (it failed while that view had the base's whole /usr).
@pytest.mark.parametrize("index", range(DEV_TASKS))
def test_dev_task_example_scores_one_and_a_wrong_answer_zero(dev_env: OSEnv, index: int) -> None:
    task = dev_env.task_set.by_index(index)
    assert not task.missing, [m.reason for m in task.missing]
    dev_env.reset(options={"index": index})
    for _ in range(2):
        obs, reward, terminated, truncated, info = dev_env.step(dev_env.expert_action())
        if terminated or truncated:
            break
    assert (obs, reward, info["status"]) == ("Correct.", 1.0, "completed")
    dev_env.reset(options={"index": index})
    _, reward, terminated, _, info = dev_env.step(
        {"name": "answer_action", "arguments": {"answer": "not-the-answer"}}
    )
    assert (reward, terminated, info["status"]) == (0.0, True, "completed")


def test_dev_file_has_the_tasks_this_test_expects(agentbench_data: Path) -> None:
    tasks = json.loads((agentbench_data / "os_interaction" / "dev.json").read_text())
    assert len(tasks) == DEV_TASKS
