"""DB task records: AgentBench's format and ours, clear errors, and the shipped generator."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from agentgym_eppo.core import TaskFormatError, asset_path
from agentgym_eppo.environments.db import DBEnv, load_db_tasks
from agentgym_eppo.environments.db.evaluation import tables_hash
from agentgym_eppo.environments.db.generator import SPLIT_SIZES, generate

TWO_TABLES = {
    "description": "Add Cara, 27, to the people.",
    "type": ["INSERT"],
    "table": [
        {
            "table_name": "people",
            "table_info": {
                "columns": [{"name": "name"}, {"name": "age"}],
                "rows": [["Ann", "31"], ["Bob", None]],
            },
        },
        {
            "table_name": "pets",
            "table_info": {"columns": [{"name": "pet"}], "rows": [["cat"]]},
        },
    ],
    "label": ["INSERT INTO people VALUES ('Cara', '27')"],
}


def test_several_tables_hash_together_after_the_change() -> None:
    expected = tables_hash([[("Ann", "31"), ("Bob", None), ("Cara", "27")], [("cat",)]])
    record = {**TWO_TABLES, "answer_md5": f"[('{expected}',)]"}
    env = DBEnv([record])
    env.reset(options={"index": 0})
    env.step(env.expert_action())
    _, reward, _, _, info = env.step(env.expert_action())
    assert (reward, info["table_hash"]) == (1.0, expected)
    env.reset(options={"index": 0})
    assert env.step({"name": "commit_final_answer", "arguments": {"answers": []}})[1] == 0.0
    env.close()


def test_agentbench_jsonl_loads_as_it_is(agentbench_data: Path) -> None:
    tasks = load_db_tasks(agentbench_data / "dbbench" / "dev.jsonl")
    first = tasks.by_index(0)
    assert (len(tasks), first.sample_id, first.task_type) == (60, "dev-0", "other")
    assert first.label == ("March 19, 1998",) and first.gold_sql == ()
    assert first.tables[0].name == "US Ambassadors and Envoy Extraordinary to Colombia"
    insert = tasks.by_index(25)
    assert insert.is_mutation and insert.gold_sql == insert.label
    assert insert.expected_hash == "43a54cd67ab403faf4d17bb44faeef5c"


def test_column_names_servers_refuse_are_renamed() -> None:
    record = copy.deepcopy(TWO_TABLES)
    record["answer_md5"] = "x"
    record["table"][1]["table_info"]["columns"] = [{"name": ""}]
    record["table"][0]["table_info"]["columns"] = [{"name": "age "}, {"name": "age"}]
    tasks = load_db_tasks([record])
    assert tasks[0].tables[0].columns == ("age", "age_2")
    assert tasks[0].tables[1].columns == ("column_1",)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.pop("description"), "record tasks-0: missing field 'description'"),
        (lambda r: r.pop("answer_md5"), "a task of type INSERT needs an 'answer_md5' string"),
        (lambda r: r.update(type=[3]), "'type' must be a list holding one string"),
        (
            lambda r: r["table"][0]["table_info"]["rows"].append(["only one"]),
            "a row of table 'people' does not have 2 values",
        ),
        (lambda r: r.update(gold_sql="SELECT 1"), "'gold_sql' must be a list of SQL strings"),
    ],
)
def test_malformed_records_are_clear_errors(change, message: str) -> None:  # type: ignore[no-untyped-def]
    record = copy.deepcopy(TWO_TABLES)
    record["answer_md5"] = "x"
    change(record)
    with pytest.raises(TaskFormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_db_tasks([record])


def test_missing_and_broken_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError, match="task file not found"):
        load_db_tasks(tmp_path / "nope.jsonl")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"description": \n')
    with pytest.raises(TaskFormatError, match="not valid JSON"):
        load_db_tasks(broken)
    listed = tmp_path / "listed.jsonl"
    listed.write_text(json.dumps([1, 2]) + "\n")
    with pytest.raises(TaskFormatError, match="record 0 is not a JSON object"):
        load_db_tasks(listed)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("oracle://scott@db/orcl", "unsupported database 'oracle'"),
        ("sqlite:////tmp/tasks.db", "keeps one in-memory database per episode"),
    ],
)
def test_unsupported_db_urls_are_clear_errors(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DBEnv(db_url=url)


def test_shipped_splits_have_their_sizes_and_every_kind() -> None:
    kinds = set()
    for split, size in SPLIT_SIZES.items():
        tasks = load_db_tasks(None, split)
        assert len(tasks) == size >= 200
        kinds |= {record.task_type for record in tasks}
        assert all(record.gold_sql for record in tasks)
    assert {"INSERT", "UPDATE", "DELETE", "counting", "comparison", "ranking", "other"} <= kinds
    assert {"aggregation-SUM", "aggregation-AVG", "aggregation-MAX", "aggregation-MIN"} <= kinds


def test_generator_is_deterministic(tmp_path: Path) -> None:
    sizes = {"dev": 30}
    first = generate(tmp_path / "a", sizes=sizes)["dev"].read_bytes()
    second = generate(tmp_path / "b", sizes=sizes)["dev"].read_bytes()
    assert first == second
    assert load_db_tasks(tmp_path / "a" / "dev.jsonl.gz")[0].sample_id == "db-dev-00000"


@pytest.mark.slow
def test_shipped_assets_are_exactly_what_the_generator_writes(tmp_path: Path) -> None:
    paths = generate(tmp_path)
    for split, path in paths.items():
        assert path.read_bytes() == asset_path("db", f"{split}.jsonl.gz").read_bytes(), split
