"""AgentBench-DB-v0 on its default backend, SQLite in memory: the DBBench contract."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgym_eppo.environments.db import DBEnv
from agentgym_eppo.environments.db.backends import SQLiteBackend
from agentgym_eppo.environments.db.tasks import TableSpec

REPO_ROOT = Path(__file__).resolve().parents[1]

PEOPLE = {
    "sample_id": "people-1",
    "description": "How old is Ann?",
    "type": ["other"],
    "label": ["31"],
    "table": {
        "table_name": "People Table",
        "table_info": {
            "columns": [{"name": "Name", "type": "TEXT"}, {"name": "1st Age", "type": "TEXT"}],
            "rows": [["Ann", "31"], ["Bob", "9"], ["Creswick ", "10"], ["O'Neil", "44"]],
        },
    },
    "add_description": "The name of this table is People Table, and the headers are Name,1st Age.",
}


def execute(query: str) -> dict[str, Any]:
    return {"name": "execute_sql", "arguments": {"query": query}}


def commit(*answers: str) -> dict[str, Any]:
    return {"name": "commit_final_answer", "arguments": {"answers": list(answers)}}


def run_expert(env: DBEnv, index: int) -> tuple[float, dict[str, Any]]:
    env.reset(options={"index": index})
    while True:
        _, reward, terminated, truncated, info = env.step(env.expert_action())
        if terminated or truncated:
            return reward, info


@pytest.fixture
def people_env() -> DBEnv:
    env = DBEnv([PEOPLE])
    env.reset(options={"index": 0})
    yield env
    env.close()


def test_reset_gives_agentbench_prompt_tools_and_info() -> None:
    env = DBEnv([PEOPLE])
    obs, info = env.reset(options={"index": 0})
    assert obs == (
        "Additional table information about the question: The name of this table is People "
        "Table, and the headers are Name,1st Age.\nQuestion: How old is Ann?\n"
    )
    assert info["task_id"] == "db" and info["sample_id"] == "people-1" and info["max_turns"] == 15
    assert [tool["function"]["name"] for tool in info["tools"]] == [
        "execute_sql",
        "commit_final_answer",
    ]
    assert info["system_prompt"].startswith("I will ask you a question, then you should help me")
    env.close()


def test_query_result_is_rendered_like_agentbench(people_env: DBEnv) -> None:
    obs, reward, terminated, _, info = people_env.step(
        execute("SELECT `Name`, `1st Age` FROM `People Table` WHERE `1st Age` = '31'")
    )
    assert obs == "[('Ann', '31')]"
    assert (reward, terminated, info["sql_error"]) == (0.0, False, False)
    obs, *_ = people_env.step(
        execute("UPDATE `People Table` SET `1st Age` = '32' WHERE Name = 'Bob'")
    )
    assert obs == "[]"


def test_mysql_dialect_runs_on_sqlite(people_env: DBEnv) -> None:
    """Backslash escapes, case-insensitive and trailing-space-blind comparison, CONCAT,
    SHOW TABLES and DESCRIBE behave as on MySQL."""
    step = people_env.step
    assert (
        step(execute("SELECT `1st Age` FROM `People Table` WHERE Name = 'O\\'Neil'"))[0]
        == "[('44',)]"
    )
    assert (
        step(execute("SELECT COUNT(*) FROM `People Table` WHERE Name = 'creswick'"))[0] == "[(1,)]"
    )
    assert step(execute("SELECT CONCAT(Name, '-', `1st Age`) FROM `People Table` LIMIT 1"))[0] == (
        "[('Ann-31',)]"
    )
    assert step(execute("SHOW TABLES"))[0] == "[('People Table',)]"
    assert step(execute("DESCRIBE `People Table`"))[0] == "[('Name', 'TEXT'), ('1st Age', 'TEXT')]"


def test_sql_errors_are_observations_and_the_episode_continues(people_env: DBEnv) -> None:
    obs, reward, terminated, truncated, info = people_env.step(execute("SELEC * FRM x"))
    assert obs.startswith("Error: ") and info["sql_error"] is True
    assert (reward, terminated, truncated, info["status"]) == (0.0, False, False, "running")
    obs, *_ = people_env.step(execute("SELECT * FROM no_such_table"))
    assert obs == "Error: no such table: no_such_table"
    obs, *_ = people_env.step(execute("SELECT 1; DROP TABLE `People Table`"))
    assert obs == "Error: found 2 SQL statements; execute exactly one statement per call"
    assert people_env.step(execute("SELECT COUNT(*) FROM `People Table`"))[0] == "[(4,)]"


def test_huge_cross_join_is_truncated_without_fetching_everything() -> None:
    env = DBEnv([PEOPLE], statement_timeout=5)
    env.reset(options={"index": 0})
    joins = ", ".join(f"`People Table` t{i}" for i in range(16))  # 4**16 rows
    obs, _, terminated, _, info = env.step(execute(f"SELECT * FROM {joins}"))
    assert len(obs) == 800 and obs.endswith("[TRUNCATED]") and obs.startswith("[('Ann', '31', ")
    assert not terminated and info["sql_error"] is False
    env.close()


def test_statement_timeout_stops_a_runaway_query_and_the_episode_goes_on() -> None:
    env = DBEnv([PEOPLE], statement_timeout=0.5)
    env.reset(options={"index": 0})
    joins = ", ".join(f"`People Table` t{i}" for i in range(16))
    obs, reward, terminated, _, _ = env.step(execute(f"SELECT COUNT(*) FROM {joins}"))
    assert obs == "Error: SQL execution timed out after 0.5 s."
    assert (reward, terminated) == (0.0, False)
    assert env.step(execute("SELECT COUNT(*) FROM `People Table`"))[0] == "[(4,)]"
    env.close()


@pytest.mark.parametrize(
    "statement",
    [
        "ATTACH DATABASE '/tmp/agentgym_attack.db' AS other",
        "VACUUM INTO '/tmp/agentgym_attack.db'",
        "PRAGMA writable_schema = ON",
        "SELECT load_extension('/tmp/agentgym_attack')",
    ],
)
def test_file_and_server_access_fails_harmlessly(people_env: DBEnv, statement: str) -> None:
    obs, _, terminated, _, info = people_env.step(execute(statement))
    assert obs.startswith("Error: ") and info["sql_error"] is True and not terminated
    assert not Path("/tmp/agentgym_attack.db").exists()
    assert people_env.step(execute("SELECT COUNT(*) FROM `People Table`"))[0] == "[(4,)]"


def test_episodes_do_not_share_a_database() -> None:
    backend = SQLiteBackend()
    table = TableSpec("t", ("a",), (("1",),))
    first, second = backend.create_episode([table]), backend.create_episode([table])
    first.execute("INSERT INTO t VALUES ('2')", 800)
    assert first.execute("SELECT COUNT(*) FROM t", 800).text == "[(2,)]"
    assert second.execute("SELECT COUNT(*) FROM t", 800).text == "[(1,)]"
    first.drop()
    second.drop()
    backend.close()


def test_right_and_wrong_answers(people_env: DBEnv) -> None:
    obs, reward, terminated, _, info = people_env.step(commit("31"))
    assert (obs, reward, terminated, info["status"], info["success"]) == (
        "Final answer committed.",
        1.0,
        True,
        "completed",
        True,
    )
    people_env.reset(options={"index": 0})
    _, reward, terminated, _, info = people_env.step(commit("30"))
    assert (reward, terminated, info["success"], info["score"]) == (0.0, True, False, 0.0)


def test_turn_limit_truncates_with_abort_penalty(people_env: DBEnv) -> None:
    for _ in range(14):
        assert people_env.step(execute("SELECT 1"))[3] is False
    _, reward, terminated, truncated, info = people_env.step(execute("SELECT 1"))
    assert (reward, terminated, truncated, info["status"]) == (
        -0.2,
        False,
        True,
        "task_limit_reached",
    )


def test_answers_must_be_a_list_of_strings(people_env: DBEnv) -> None:
    obs, reward, _, _, info = people_env.step(
        {"name": "commit_final_answer", "arguments": {"answers": "31"}}
    )
    assert obs == (
        "Invalid tool call: commit_final_answer: argument 'answers' must be array, got string"
    )
    assert (reward, info["status"]) == (-0.2, "agent_validation_failed")


def test_hermes_text_calls_work(people_env: DBEnv) -> None:
    text = 'Let me look.\n<tool_call>\n{"name": "execute_sql", "arguments": {"query": "SELECT COUNT(*) FROM `People Table`"}}\n</tool_call>'
    assert people_env.step(text)[0] == "[(4,)]"


def test_agentbench_dev_set_expert_scores_one_and_wrong_answers_zero(agentbench_data: Path) -> None:
    env = DBEnv(str(agentbench_data / "dbbench" / "dev.jsonl"))
    assert env.num_tasks == 60
    for index in range(env.num_tasks):
        reward, info = run_expert(env, index)
        assert reward == 1.0, (index, info)
        env.reset(options={"index": index})
        wrong = commit() if env.record.is_mutation else commit("certainly not the answer")
        assert env.step(wrong)[1] == 0.0, index
    env.close()


def test_agentbench_insert_hashes_reproduce_answer_md5(agentbench_data: Path) -> None:
    """The 40 INSERT/UPDATE records: replaying the label and hashing in Python gives
    exactly AgentBench's recorded MySQL hash."""
    env = DBEnv(str(agentbench_data / "dbbench" / "dev.jsonl"))
    mutations = [i for i, record in enumerate(env.task_set) if record.is_mutation]
    assert len(mutations) == 40
    for index in mutations:
        _, info = run_expert(env, index)
        assert info["table_hash"] == env.record.expected_hash
    env.close()


@pytest.mark.slow
@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_every_shipped_task_is_solved_by_the_expert(split: str) -> None:
    env = DBEnv(split=split)
    assert env.num_tasks == {"train": 1000, "dev": 200, "test": 200}[split]
    for index in range(env.num_tasks):
        reward, info = run_expert(env, index)
        assert reward == 1.0, (split, index, info)
    env.close()


def test_abandoned_env_releases_its_database_when_collected() -> None:
    env = DBEnv([PEOPLE])
    env.reset(options={"index": 0})
    connection = env.database.connection  # type: ignore[attr-defined]
    del env
    gc.collect()
    with pytest.raises(Exception, match="closed"):
        connection.execute("SELECT 1")


def test_gymnasium_check_env_passes() -> None:
    check_env(DBEnv([PEOPLE]), skip_render_check=True)


def _run_python(code: str) -> str:
    """What ``code`` prints, run in a fresh interpreter that sees only the checkout."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


def test_gym_make_works_in_a_fresh_process_without_import() -> None:
    code = (
        "import gymnasium as gym, json\n"
        "env = gym.make('agentgym_eppo:AgentBench-DB-v0', split='dev')\n"
        "obs, info = env.reset(seed=3)\n"
        "while True:\n"
        "    obs, reward, terminated, truncated, info = env.step(env.unwrapped.expert_action())\n"
        "    if terminated or truncated: break\n"
        "print(json.dumps([info['task_id'], reward, env.unwrapped.num_tasks]))\n"
    )
    output = _run_python(code)
    assert json.loads(output.strip().splitlines()[-1]) == ["db", 1.0, 200]


def test_registered_id_builds_the_db_env() -> None:
    import agentgym_eppo  # noqa: F401 - registers the ids

    env = gym.make("AgentBench-DB-v0", tasks=[PEOPLE])
    assert isinstance(env.unwrapped, DBEnv)
    env.close()


def test_expert_keeps_its_plan_when_other_statements_come_between() -> None:
    env = DBEnv(split="dev")
    env.reset(options={"index": 0})
    first = env.expert_action()
    assert first["name"] == "execute_sql"
    env.step(execute("SELECT 1"))
    assert env.expert_action() == first
    env.step(first)
    env.step(execute("SELECT 2"))
    _, reward, terminated, _, _ = env.step(env.expert_action())
    assert (reward, terminated) == (1.0, True)
    env.close()


def test_docs_example_runs_and_solves_its_task() -> None:
    """The first Python block of docs/db.md (the README's gym.make example) runs as is."""
    text = (REPO_ROOT / "docs" / "db.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(code.strip().splitlines()) <= 10
    output = _run_python(code).splitlines()
    assert output[0].startswith("[('") and output[-1] == "1.0 completed"


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    query=st.text(max_size=200) | st.sampled_from(["SELECT '\x00'", "SELECT '\ud800'", "(" * 5000])
)
def test_any_query_text_is_an_observation_never_an_end(people_env: DBEnv, query: str) -> None:
    if people_env.status.value != "running" or people_env.turn >= 14:
        people_env.reset(options={"index": 0})
    obs, reward, terminated, truncated, info = people_env.step(execute(query))
    assert isinstance(obs, str) and (reward, terminated, truncated) == (0.0, False, False)
    assert info["status"] == "running"
