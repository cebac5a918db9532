"""AgentBench-KG-v0: the tools' semantics and wording, rewards, the expert, the contract.

Runs on a tiny hand-made graph (tests/support/kg_fixtures.py): Ada Lane directed First Light,
Second Wind and Third Act; Bo Reed stars in the first two, Cy Moss in the first and
third; Second Wind and Third Act both run 120 minutes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from support.kg_fixtures import (
    ACTOR_BO,
    DIRECTOR_ID,
    FIRST,
    SECOND,
    call,
    tiny_task,
    write_tiny_graph,
)

import agentgym_eppo  # noqa: F401 - registers the ids
from agentgym_eppo.environments.kg import KGEnv


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_graph(tmp_path_factory.mktemp("kg") / "tiny.nt.gz")


def make_env(graph_file: Path, store: str = "oxigraph", **kwargs: Any) -> KGEnv:
    tasks = kwargs.pop("tasks", [tiny_task()])
    return KGEnv(tasks=tasks, graph=graph_file, store=store, **kwargs)  # type: ignore[arg-type]


def run(env: KGEnv, *actions: Any) -> list[tuple[str, float, bool, bool, dict[str, Any]]]:
    return [env.step(action) for action in actions]


def test_reset_shows_the_question_and_entities_as_agentbench_does(graph_file: Path) -> None:
    env = make_env(graph_file)
    obs, info = env.reset(options={"index": 0})
    assert obs == "which films directed by Ada Lane star Bo Reed?\nEntities: [Ada Lane, Bo Reed]"
    assert info["task_id"] == "kg" and info["sample_id"] == "tiny-0" and info["max_turns"] == 15
    assert [tool["function"]["name"] for tool in info["tools"]] == [
        "get_relations",
        "get_neighbors",
        "intersection",
        "get_attributes",
        "argmax",
        "argmin",
        "count",
        "final_answer",
    ]
    assert "Final Answer: #3" in info["system_prompt"] and "15 rounds" in info["system_prompt"]


@pytest.mark.parametrize("store", ["oxigraph", "rdflib"])
def test_tools_answer_with_agentbench_observations(graph_file: Path, store: str) -> None:
    env = make_env(graph_file, store)
    env.reset(options={"index": 0})
    observations = [
        step[0]
        for step in run(
            env,
            call("get_relations", variable="Ada Lane"),
            call("get_neighbors", variable="Ada Lane", relation="film.director.film"),
            call("get_relations", variable=ACTOR_BO),
            call("get_neighbors", variable=ACTOR_BO, relation="film.actor.film"),
            call("intersection", variable1="#0", variable2="#1"),
            call("get_attributes", variable="#0"),
            call("argmax", variable="#0", attribute="film.film.runtime"),
            call("argmin", variable="#2", attribute="film.film.initial_release_date"),
            call("count", variable="#2"),
        )
    ]
    assert observations == [
        "Observation: [film.director.film]",
        "Observation: variable #0, which are instances of film.film",
        "Observation: [film.actor.film]",
        "Observation: variable #1, which are instances of film.film",
        "Observation: variable #2, which are instances of film.film",
        "Observation: [film.film.initial_release_date, film.film.runtime]",
        "Observation: variable #3, which are instances of film.film",
        "Observation: variable #4, which are instances of film.film",
        "Observation: variable #5, which is a number",
    ]
    assert [str(variable) for variable in env.unwrapped.session.variables][2] == (
        f"(AND (JOIN (R film.director.film) {DIRECTOR_ID}) (JOIN (R film.actor.film) {ACTOR_BO}))"
    )


@pytest.mark.parametrize("store", ["oxigraph", "rdflib"])
def test_final_answer_scores_exact_set_match_with_f1(graph_file: Path, store: str) -> None:
    env = make_env(graph_file, store)
    env.reset(options={"index": 0})
    run(
        env,
        call("get_neighbors", variable="Ada Lane", relation="film.director.film"),
        call("get_neighbors", variable="Bo Reed", relation="film.actor.film"),
        call("intersection", variable1="#0", variable2="#1"),
    )
    obs, reward, terminated, truncated, info = env.step(call("final_answer", variable="#2"))
    assert obs == (
        f"Observation: variable #2 holds 2 entities: {FIRST} (First Light), {SECOND} (Second Wind)"
    )
    assert (reward, terminated, truncated, info["status"]) == (1.0, True, False, "completed")
    assert info["success"] is True and info["score"] == 1.0 and info["answer"] == [FIRST, SECOND]

    env.reset(options={"index": 0})
    env.step(call("get_neighbors", variable="Ada Lane", relation="film.director.film"))
    _, reward, _, _, info = env.step(call("final_answer", variable="#0"))
    assert (reward, info["success"]) == (0.0, False)
    assert info["score"] == pytest.approx(0.8)  # precision 2/3, recall 1


def test_argmax_tie_goes_to_the_smallest_id_on_every_store(graph_file: Path) -> None:
    for store in ("oxigraph", "rdflib"):
        env = make_env(graph_file, store)
        env.reset(options={"index": 0})
        env.step(call("get_neighbors", variable="Ada Lane", relation="film.director.film"))
        env.step(call("argmax", variable="#0", attribute="film.film.runtime"))
        _, _, _, _, info = env.step(call("final_answer", variable="#1"))
        assert info["answer"] == [SECOND], store


def test_count_is_answered_as_a_number(graph_file: Path) -> None:
    env = make_env(graph_file, tasks=[tiny_task(answer=[{"answer_argument": "3"}])])
    env.reset(options={"index": 0})
    env.step(call("get_neighbors", variable="Ada Lane", relation="film.director.film"))
    env.step(call("count", variable="#0"))
    obs, reward, _, _, info = env.step(call("final_answer", variable="#1"))
    assert (obs, reward, info["answer"]) == ("Observation: variable #1 is the number 3", 1.0, ["3"])


def test_text_final_answer_is_accepted_as_in_agentbench(graph_file: Path) -> None:
    env = make_env(graph_file)
    env.reset(options={"index": 0})
    run(
        env,
        call("get_neighbors", variable="Ada Lane", relation="film.director.film"),
        call("get_neighbors", variable="Bo Reed", relation="film.actor.film"),
        call("intersection", variable1="#0", variable2="#1"),
    )
    text = "Thought: #2 holds the films of both. Final Answer: #2\nObservation: made up"
    _, reward, terminated, _, info = env.step(text)
    assert (reward, terminated, info["status"]) == (1.0, True, "completed")


def test_get_neighbors_rejects_a_relation_the_variable_does_not_have(graph_file: Path) -> None:
    env = make_env(graph_file)
    env.reset(options={"index": 0})
    obs, reward, terminated, _, info = env.step(
        call("get_neighbors", variable="Ada Lane", relation="film.actor.film")
    )
    assert obs == (
        "Error processing tool call: get_neighbors: relation must be a relation of the "
        "variable, got 'film.actor.film'"
    )
    assert (reward, terminated, info["status"]) == (0.0, False, "running")
    assert env.unwrapped.session.variables == []


def test_intersection_needs_two_variables_of_one_type(graph_file: Path) -> None:
    env = make_env(graph_file)
    env.reset(options={"index": 0})
    run(
        env,
        call("get_neighbors", variable="Ada Lane", relation="film.director.film"),
        call("get_neighbors", variable="#0", relation="film.film.starring"),
    )
    obs, *_ = env.step(call("intersection", variable1="#0", variable2="#1"))
    assert obs == (
        "Error processing tool call: intersection: two variables must have the same type, "
        "got film.film and film.actor"
    )
    obs, *_ = env.step(call("intersection", variable1="#0", variable2="Bo Reed"))
    assert obs == (
        "Error processing tool call: intersection: variable must be a variable such as #0, "
        "got 'Bo Reed'"
    )


def test_tools_that_need_a_set_reject_an_entity_or_a_number(graph_file: Path) -> None:
    env = make_env(graph_file)
    env.reset(options={"index": 0})
    obs, *_ = env.step(call("count", variable="Ada Lane"))
    assert (
        obs
        == "Error processing tool call: count: variable must be a variable such as #0, got 'Ada Lane'"
    )
    run(
        env,
        call("get_neighbors", variable="Ada Lane", relation="film.director.film"),
        call("count", variable="#0"),
    )
    obs, *_ = env.step(call("get_relations", variable="#1"))
    assert (
        obs
        == "Error processing tool call: get_relations: variable #1 is a number, not a set of entities"
    )
    obs, *_ = env.step(call("argmax", variable="#0", attribute="film.film.genre"))
    assert obs == (
        "Error processing tool call: argmax: attribute must be an attribute of the variable, "
        "got 'film.film.genre'"
    )


def test_turn_limit_truncates_with_the_abort_penalty(graph_file: Path) -> None:
    env = make_env(graph_file, max_turns=2)
    env.reset(options={"index": 0})
    env.step(call("get_relations", variable="Ada Lane"))
    _, reward, terminated, truncated, info = env.step(call("get_relations", variable="Ada Lane"))
    assert (reward, terminated, truncated, info["status"]) == (
        -0.2,
        False,
        True,
        "task_limit_reached",
    )


def test_expert_solves_the_task_and_recovers_after_a_detour(graph_file: Path) -> None:
    env = make_env(graph_file)
    env.reset(options={"index": 0})
    assert env.expert_action() == call("get_relations", variable="Ada Lane")  # not its id
    env.step(env.expert_action())
    env.step(env.expert_action())  # gold #0
    env.step(call("get_neighbors", variable="#0", relation="film.film.starring"))  # detour: #1
    env.step(env.expert_action())
    assert env.expert_action() == call(
        "get_neighbors", variable="Bo Reed", relation="film.actor.film"
    )
    env.step(env.expert_action())  # gold #1 is now #2
    assert env.expert_action() == call("intersection", variable1="#0", variable2="#2")
    env.step(env.expert_action())
    assert env.expert_action() == call("final_answer", variable="#3")
    _, reward, terminated, _, info = env.step(env.expert_action())
    assert (reward, terminated, info["success"]) == (1.0, True, True)


def test_expert_names_entities_as_the_question_shows_them_and_accepts_their_ids(
    graph_file: Path,
) -> None:
    env = make_env(graph_file)
    env.reset(options={"index": 0})
    assert env.expert_action() == call("get_relations", variable="Ada Lane")
    env.step(call("get_relations", variable=DIRECTOR_ID))  # the agent used the id
    assert env.expert_action()["name"] != "get_relations"  # the plan moved on


def test_gym_make_builds_the_registered_env_and_check_env_passes(graph_file: Path) -> None:
    env = gym.make("AgentBench-KG-v0", tasks=[tiny_task()], graph=graph_file)
    assert isinstance(env.unwrapped, KGEnv)
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_shipped_env_is_the_default_and_deterministic() -> None:
    first, second = KGEnv(split="dev"), KGEnv(split="dev")
    assert first.num_tasks == 200
    transcript = []
    for env in (first, second):
        obs, info = env.reset(seed=3)
        steps = [obs, info["sample_id"]]
        while True:
            obs, reward, terminated, truncated, info = env.step(env.expert_action())
            steps.append((obs, reward, info))
            if terminated or truncated:
                break
        transcript.append(steps)
    assert transcript[0] == transcript[1]
    assert transcript[0][-1][1] == 1.0


def test_feedback_mode_returns_call_errors_and_continues(graph_file: Path) -> None:
    env = make_env(graph_file, invalid_action="feedback")
    env.reset(options={"index": 0})
    obs, reward, terminated, _, _ = env.step(call("get_neighbors", variable="Ada Lane"))
    assert obs.startswith(
        "Invalid tool call: get_neighbors: missing required argument(s) 'relation'"
    )
    assert (reward, terminated) == (0.0, False)


def test_final_answer_text_inside_a_tool_call_message_is_not_a_final_answer(
    graph_file: Path,
) -> None:
    env = make_env(graph_file)
    env.reset(options={"index": 0})
    text = (
        "Final Answer: #0 is not known yet.\n"
        '<tool_call>{"name": "get_relations", "arguments": {"variable": "Ada Lane"}}</tool_call>'
    )
    obs, _, terminated, _, _ = env.step(text)
    assert (obs, terminated) == ("Observation: [film.director.film]", False)
