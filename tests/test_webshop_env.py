"""AgentBench-WebShop-v0 end to end: the contract, AgentBench's observations, the expert."""

from __future__ import annotations

import random
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from support.webshop_support import play, random_policy

import agentgym_eppo
from agentgym_eppo.core import ABORT_PENALTY
from agentgym_eppo.environments.webshop.env import SYSTEM_PROMPT, WebShopEnv


@pytest.fixture(scope="module")
def env() -> WebShopEnv:
    return WebShopEnv(split="test")


def search(keywords: str) -> dict[str, Any]:
    return {"name": "search_action", "arguments": {"keywords": keywords}}


def click(value: str) -> dict[str, Any]:
    return {"name": "click_action", "arguments": {"value": value}}


def open_goal_item(env: WebShopEnv, index: int = 0) -> None:
    """Reset to task ``index`` and follow the expert up to the goal's item page."""
    env.reset(options={"index": index})
    env.step(env.expert_action())
    while env.session.asin != env.record.goal.asin:
        env.step(env.expert_action())


def test_gym_make_registers_the_environment() -> None:
    assert agentgym_eppo.registration.env_id_for("webshop") == "AgentBench-WebShop-v0"
    made = gym.make("AgentBench-WebShop-v0", split="dev")
    _, info = made.reset(options={"index": 3})
    assert info["sample_id"] == "webshop-dev-3"
    assert made.unwrapped.num_tasks == 200


def test_reset_shows_the_search_page_as_agentbench_does(env: WebShopEnv) -> None:
    obs, info = env.reset(options={"index": 0})
    instruction = env.record.instruction
    assert obs == (
        "The initial observation:\n"
        f"WebShop [SEP] Instruction: [SEP] {instruction} [SEP] Search\n\n"
        "Available Actions:\n{'has_search_bar': True, 'clickables': ['search']}"
    )
    assert info["task_id"] == "webshop" and info["max_turns"] == 20
    assert info["system_prompt"] == SYSTEM_PROMPT
    assert [tool["function"]["name"] for tool in info["tools"]] == [
        "search_action",
        "click_action",
    ]


def test_search_shows_ten_results_of_the_top_fifty(env: WebShopEnv) -> None:
    env.reset(options={"index": 0})
    obs, reward, terminated, truncated, info = env.step(search("Throw Pillow Cover"))
    assert (reward, terminated, truncated, info["valid_action"]) == (0.0, False, False, True)
    assert obs.startswith("Action: search[Throw Pillow Cover]\n\nObservation:\nInstruction: [SEP]")
    assert "[SEP] Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] B0" in obs
    clickables = env.available_actions()["clickables"]
    assert clickables[:2] == ["back to search", "next >"] and len(clickables) == 12
    assert obs.endswith(f"Available Actions:\n{env.available_actions()}")


def test_expert_scores_one_on_every_shipped_goal() -> None:
    for split, size in (("train", 1000), ("dev", 200), ("test", 200)):
        env = WebShopEnv(split=split)
        assert env.num_tasks == size
        for index in range(size):
            reward, info = play(env, index, lambda e: e.expert_action())
            assert (reward, info["status"]) == (1.0, "completed"), (split, index, info)


def test_random_agent_scores_well_below_the_expert(env: WebShopEnv) -> None:
    policy = random_policy(random.Random(0))
    scores = [play(env, index, policy)[1]["score"] for index in range(100)]
    assert sum(scores) / len(scores) < 0.4


def test_buying_reports_every_reward_term_in_info(env: WebShopEnv) -> None:
    reward, info = play(env, 5, lambda e: e.expert_action())
    goal = env.record.goal
    assert reward == info["reward"] == info["score"] == 1.0 and info["success"] is True
    assert info["purchased_asin"] == goal.asin
    assert sorted(info["purchased_options"].values()) == sorted(goal.options)
    for key in ("r_type", "r_att", "r_option", "r_price", "w_att", "w_option", "w_price"):
        assert key in info
    assert info["title_score"] == 1.0 and info["query_match"] and info["category_match"]
    assert info["w_att"] + info["w_option"] + info["w_price"] == pytest.approx(1.0)


def test_buying_without_choosing_options_earns_partial_reward(env: WebShopEnv) -> None:
    index = next(k for k in range(env.num_tasks) if env.task_set[k].goal.options)
    open_goal_item(env, index)
    goal = env.record.goal
    obs, reward, terminated, _, info = env.step(click("Buy Now"))
    expected = (len(goal.attributes) + 1) / (len(goal.attributes) + len(goal.options) + 1)
    assert terminated and reward == pytest.approx(expected) and 0 < reward < 1
    assert info["num_option_matches"] == 0 and info["r_option"] == 0.0
    assert obs.endswith(f"Your score (min 0.0, max 1.0) [SEP] {reward}")


def test_native_strings_and_agentbench_action_lines_are_accepted(env: WebShopEnv) -> None:
    env.reset(options={"index": 0})
    obs, *_ = env.step("search[pillow cover]")
    assert obs.startswith("Action: search[pillow cover]")
    asin = env.available_actions()["clickables"][2]
    obs, *_ = env.step(f"Thought:\nI think I should open it.\n\nAction:\nclick[{asin.upper()}]")
    assert obs.startswith(f"Action: click[{asin.upper()}]") and env.session.asin == asin.upper()


def test_a_tool_call_block_wins_over_native_text_in_the_reasoning(env: WebShopEnv) -> None:
    env.reset(options={"index": 0})
    text = (
        "Maybe Action: search[socks]? No.\n"
        '<tool_call>{"name": "search_action", "arguments": {"keywords": "olive oil"}}</tool_call>'
    )
    obs, *_ = env.step(text)
    assert obs.startswith("Action: search[olive oil]")


def test_invalid_click_changes_nothing_and_says_so(env: WebShopEnv) -> None:
    env.reset(options={"index": 0})
    env.step(search("olive oil"))
    before = env.available_actions()
    obs, reward, terminated, _, info = env.step(click("Buy Now"))
    assert (reward, terminated, info["valid_action"]) == (0.0, False, False)
    assert "Invalid action: 'Buy Now' is not a clickable on this page. Nothing changed." in obs
    assert env.available_actions() == before and info["status"] == "running"


def test_turn_limit_truncates_with_the_abort_penalty(env: WebShopEnv) -> None:
    env.reset(options={"index": 0})
    for _ in range(19):
        assert env.step(click("nowhere"))[2:4] == (False, False)
    _, reward, terminated, truncated, info = env.step(click("nowhere"))
    assert (reward, terminated, truncated) == (ABORT_PENALTY, False, True)
    assert info["status"] == "task_limit_reached" and info["turn"] == 20


def test_a_message_with_no_call_aborts(env: WebShopEnv) -> None:
    env.reset(options={"index": 0})
    _, reward, terminated, _, info = env.step("I would like to buy it")
    assert (reward, terminated, info["status"]) == (ABORT_PENALTY, True, "agent_invalid_action")


def test_text_rich_mode_marks_buttons_and_chosen_options() -> None:
    env = WebShopEnv(split="test", observation_mode="text_rich")
    index = next(k for k in range(env.num_tasks) if env.task_set[k].goal.options)
    open_goal_item(env, index)
    value = env.record.goal.options[0]
    obs, *_ = env.step(click(value))
    page = obs.split("Observation:\n", 1)[1]
    assert page.startswith(f"You have clicked {value}.\nInstruction:\n")
    assert "[button] Back to Search [button_]\n[button] < Prev [button_]\n" in page
    assert f"  [clicked button] {value} [clicked button_]\n" in page
    assert "[button] Buy Now [button_]\n" in page


def test_attributes_page_only_with_show_attributes() -> None:
    env = WebShopEnv(split="test", show_attributes=True)
    open_goal_item(env)
    assert "attributes" in env.available_actions()["clickables"]
    obs, *_ = env.step(click("Attributes"))
    product = env.site.product(env.session)
    assert f"[SEP] < Prev [SEP] {product.attributes[0]} [SEP]" in obs
    assert obs.split("\n\nAvailable")[0].endswith(product.product_category)


def test_bad_constructor_values_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="observation_mode must be one of"):
        WebShopEnv(observation_mode="html")  # type: ignore[arg-type]


def test_same_actions_give_the_same_transcript() -> None:
    def transcript() -> list[Any]:
        env = WebShopEnv(split="dev")
        obs, _ = env.reset(seed=11)
        out = [obs]
        for action in ("search[usb c charger]", "click[next >]", "click[< prev]"):
            out.append(env.step(action)[:4])
        return out

    assert transcript() == transcript()


def test_gymnasium_check_env_passes() -> None:
    check_env(WebShopEnv(split="test"), skip_render_check=True)


@pytest.mark.parametrize(
    "keywords",
    ["", "   ", "x" * 10_000, '"oil" AND title:(free] OR', "ünïcödé 中文 🙂 olive oil"],
)
def test_hostile_searches_are_ordinary_observations(env: WebShopEnv, keywords: str) -> None:
    env.reset(options={"index": 0})
    obs, reward, terminated, truncated, info = env.step(search(keywords))
    assert (reward, terminated, truncated, info["status"]) == (0.0, False, False, "running")
    if keywords.strip():
        assert info["valid_action"] and env.session.page.value == "results"
    else:
        assert not info["valid_action"] and "Empty search: type some keywords." in obs
        assert env.session.page.value == "search"


def test_empty_native_search_is_an_empty_search(env: WebShopEnv) -> None:
    env.reset(options={"index": 0})
    obs, *_, info = env.step("search[]")
    assert not info["valid_action"] and obs.startswith("Action: search[]\n\nObservation:\nInvalid")
