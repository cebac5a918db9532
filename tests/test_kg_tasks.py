"""KG task files: AgentBench's own load as they are; the shipped sets and graph are sound.

AgentBench's gold actions name real Freebase entities, so without a Freebase endpoint
the test is static: every action parses into a call of our tools and passes the
validator (right tool, right arguments, variables used only after they exist).
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from agentgym_eppo.core import TaskFormatError, asset_path, parse_function_call
from agentgym_eppo.environments.kg import KGEnv, load_kg_tasks
from agentgym_eppo.environments.kg.actions import KG_TOOLS, check_gold_actions, parse_action
from agentgym_eppo.environments.kg.generator import GraphConfig, write_assets
from agentgym_eppo.environments.kg.tasks import score_answer, shipped_graph_path


def test_agentbench_dev_records_load_and_their_gold_actions_pass_the_validator(
    agentbench_data: Path,
) -> None:
    path = agentbench_data / "knowledgegraph" / "dev.json"
    raw = json.loads(path.read_text())
    tasks = load_kg_tasks(str(path), "dev")
    assert len(tasks) == len(raw) == 20
    calls = Counter()
    for record, row in zip(tasks, raw, strict=True):
        assert record.sample_id == row["qid"]
        assert record.answers == {answer["answer_argument"] for answer in row["answer"]}
        for text, parsed in zip(
            row["actions"], check_gold_actions(row["actions"], row["entities"]), strict=True
        ):
            assert parse_function_call(parsed.to_dict(), KG_TOOLS) == parsed
            calls[parsed.name] += 1
            assert parsed.name == text.split("(")[0]
    assert calls == {
        "get_relations": 56,
        "get_neighbors": 56,
        "intersection": 17,
        "count": 3,
        "get_attributes": 3,
        "argmax": 3,
    }
    env = KGEnv(tasks=str(path))
    obs, info = env.reset(options={"index": 0})
    assert (
        obs.startswith("what position did pat connaughton") and info["sample_id"] == raw[0]["qid"]
    )
    name = "Did you see that thing? That’s Sidat-Singh! The Syracuse Walking Dream!"
    assert raw[0]["entities"][name] == "m.09rl290"  # the expert names it as the question does
    assert env.expert_action() == {"name": "get_relations", "arguments": {"variable": name}}


def test_agentbench_train_records_without_answer_types_load(agentbench_data: Path) -> None:
    tasks = load_kg_tasks(str(agentbench_data / "knowledgegraph" / "train.json"), "train")
    assert len(tasks) == 1214
    record = tasks.by_sample_id("WebQTrn-810_c334509bb5e02cacae1ba2e80c176499_cwq")
    assert (
        record.answers == {"m.0117q3yz"} and record.actions[-1] == "argmax(#1,time.event.end_date)"
    )


def test_action_strings_parse_into_calls() -> None:
    assert parse_action("get_neighbors(m.0abc,film.film.genre)").to_dict() == {
        "name": "get_neighbors",
        "arguments": {"variable": "m.0abc", "relation": "film.film.genre"},
    }
    assert parse_action("intersection(#1, #2)").arguments == {"variable1": "#1", "variable2": "#2"}
    assert parse_action("get_relations(Smith, John)").arguments == {"variable": "Smith, John"}
    with pytest.raises(ValueError, match="not a tool call"):
        parse_action("get_relations m.0abc")
    with pytest.raises(ValueError, match="unknown tool 'drop'"):
        parse_action("drop(m.0abc)")
    with pytest.raises(ValueError, match="missing required argument"):
        parse_action("get_neighbors(m.0abc)")


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        (
            ["get_relations(m.0a)", "intersection(#0,#1)"],
            "action 1 'intersection(#0,#1)': #0 is used before it exists",
        ),
        (
            ["get_relations(Nobody)"],
            "'Nobody' is neither a variable, an entity of the question nor an id",
        ),
        (["get_neighbors(m.0a,genre)"], "relation 'genre' is not a property name"),
        (["count(m.0a)"], "count needs a variable such as #0, got 'm.0a'"),
    ],
)
def test_broken_gold_actions_are_rejected_at_load(actions: list[str], message: str) -> None:
    row = {
        "qid": "q",
        "question": "?",
        "entities": {},
        "actions": actions,
        "answer": [{"answer_argument": "x"}],
    }
    with pytest.raises(TaskFormatError, match="records\\[0\\]: gold ") as error:
        load_kg_tasks([row], "train")
    assert message in str(error.value)


def test_malformed_records_name_the_field() -> None:
    with pytest.raises(TaskFormatError, match="'question' must be a non-empty string"):
        load_kg_tasks([{"answer": [{"answer_argument": "x"}]}], "train")
    with pytest.raises(TaskFormatError, match="'answer' must be a non-empty list"):
        load_kg_tasks([{"question": "q", "answer": []}], "train")
    with pytest.raises(TaskFormatError, match="'entities' must map entity names to ids"):
        load_kg_tasks(
            [{"question": "q", "entities": ["a"], "answer": [{"answer_argument": "x"}]}], "train"
        )


def test_score_is_exact_set_match_and_f1() -> None:
    assert score_answer(["a", "b"], frozenset({"a", "b"})) == (1.0, 1.0)
    assert score_answer(["a"], frozenset({"a", "b"})) == (0.0, pytest.approx(2 / 3))
    assert score_answer(["c"], frozenset({"a"})) == (0.0, 0.0)
    assert score_answer([], frozenset({"a"})) == (0.0, 0.0)


def test_shipped_splits_have_the_promised_sizes_and_kinds() -> None:
    sizes = {split: len(load_kg_tasks(None, split)) for split in ("train", "dev", "test")}
    assert sizes == {"train": 1200, "dev": 200, "test": 200}
    ids = [record.sample_id for split in sizes for record in load_kg_tasks(None, split)]
    assert len(ids) == len(set(ids)), "a question appears in two splits"
    with gzip.open(asset_path("kg", "train.jsonl.gz"), "rt") as handle:
        kinds = Counter(json.loads(line)["kind"] for line in handle)
    assert set(kinds) == {"one_hop", "two_hop", "intersection", "count", "argmax", "argmin"}
    assert min(kinds.values()) >= 50


def test_shipped_graph_is_freebase_shaped_with_at_least_50k_triples() -> None:
    with gzip.open(shipped_graph_path(), "rt") as handle:
        lines = handle.read().splitlines()
    assert len(lines) >= 50_000
    assert shipped_graph_path().stat().st_size < 2_000_000
    text = "\n".join(lines[:: max(1, len(lines) // 5000)])
    assert "<http://rdf.freebase.com/ns/type.object.name>" in text
    predicates = {line.split(" ")[1] for line in lines}
    assert "<http://rdf.freebase.com/ns/film.film.directed_by>" in predicates
    assert "<http://rdf.freebase.com/ns/film.director.film>" in predicates  # the reverse
    assert "<http://rdf.freebase.com/ns/type.property.unit>" in predicates
    domains = {p.split("/ns/")[1].split(".")[0] for p in predicates}
    assert {"film", "music", "location", "sports", "organization", "people"} <= domains


def test_generator_is_deterministic_and_reproduces_the_shipped_files(tmp_path: Path) -> None:
    write_assets(tmp_path / "a")
    for name in ("freebase_mini.nt.gz", "train.jsonl.gz", "dev.jsonl.gz", "test.jsonl.gz"):
        assert (tmp_path / "a" / name).read_bytes() == asset_path("kg", name).read_bytes(), name
    small = GraphConfig(
        countries=6,
        people=400,
        films=150,
        artists=60,
        albums=150,
        teams=30,
        facilities=25,
        organizations=60,
        labels=8,
    )
    counts = write_assets(tmp_path / "b", seed=5, config=small, sizes=(40, 10, 10))
    write_assets(tmp_path / "c", seed=5, config=small, sizes=(40, 10, 10))
    assert counts["train"] == 40
    for name in ("freebase_mini.nt.gz", "train.jsonl.gz"):
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "c" / name).read_bytes()
