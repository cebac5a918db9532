"""WebShop's reward, term by term, on hand-made products and goals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agentgym_eppo.environments.webshop.catalog import Product
from agentgym_eppo.environments.webshop.nouns import heuristic_nouns
from agentgym_eppo.environments.webshop.reward import (
    Goal,
    get_reward,
    normalize_color,
    option_matches,
    token_set_ratio,
    type_reward,
)

SHIRT = Product(
    asin="B0SHIRT001",
    title="Northwind Classic Cotton T-Shirt, Crew Neck",
    category="fashion",
    query="men's t-shirt",
    product_category="Clothing › Men › Shirts › T-Shirts",
    description="A soft cotton shirt, machine wash.",
    bullet_points=("Relaxed fit", "Tagless collar"),
    attributes=("machine wash", "relaxed fit", "short sleeve"),
    options={"color": ("navy blue", "black"), "size": ("large", "x-large")},
    price=19.99,
    price_tag="$19.99",
)
GOAL = Goal(
    asin="B0SHIRT001",
    instruction_text="i need a machine wash short sleeve t-shirt",
    attributes=("machine wash", "short sleeve"),
    options=("navy blue", "large"),
    price_upper=30.0,
    query="men's t-shirt",
    category="fashion",
    product_category="Clothing › Men › Shirts › T-Shirts",
    name="Northwind Classic Cotton T-Shirt, Crew Neck",
)


def test_exact_purchase_scores_one_with_every_term() -> None:
    result = get_reward(SHIRT, GOAL, 19.99, {"color": "navy blue", "size": "large"})
    assert result.reward == 1.0
    assert (result.r_type, result.r_att, result.r_option, result.r_price) == (1.0, 1.0, 1.0, True)
    assert (result.num_attr_matches, result.num_option_matches) == (2, 2)
    assert (result.w_att, result.w_option, result.w_price) == (0.4, 0.4, 0.2)


def test_missing_options_and_price_over_the_cap_lose_their_share() -> None:
    result = get_reward(SHIRT, GOAL, 45.0, {})
    assert result.reward == pytest.approx(2 / 5)
    assert result.r_price is False and result.r_option == 0.0


def test_options_match_fuzzily_whatever_their_group_as_in_webshop() -> None:
    # No exact rule for sizes: "x-large" and "large" share every token of "large".
    other_size = get_reward(SHIRT, GOAL, 19.99, {"color": "navy blue", "size": "x-large"})
    assert other_size.num_option_matches == 2
    # WebShop normalises colours to the first colour word of its list: both are "blue".
    similar_color = get_reward(SHIRT, GOAL, 19.99, {"color": "royal blue", "size": "large"})
    assert similar_color.num_option_matches == 2
    wrong_color = get_reward(SHIRT, GOAL, 19.99, {"color": "black", "size": "large"})
    assert wrong_color.num_option_matches == 1


def test_option_found_only_in_the_product_text_earns_nothing() -> None:
    # WebShop's get_option_reward looks at the chosen options only, never the text.
    goal = replace(GOAL, options=("tagless collar",))
    result = get_reward(SHIRT, goal, 19.99, {"color": "navy blue"})
    assert result.num_option_matches == 0


def test_each_goal_option_counts_once_and_extra_choices_add_nothing() -> None:
    assert option_matches(["navy blue"], ["navy blue", "blue", "royal blue"]) == 1
    goal = replace(GOAL, options=("navy blue",))
    chosen = {"color": "navy blue", "size": "large", "style": "relaxed fit"}
    result = get_reward(SHIRT, goal, 19.99, chosen)
    assert result.num_option_matches == 1 and result.reward == 1.0


def test_attributes_match_fuzzily_or_by_substring_of_the_text() -> None:
    goal = replace(GOAL, attributes=("Machine-Wash", "soft cotton", "waterproof"))
    result = get_reward(SHIRT, goal, 19.99, {})
    assert result.num_attr_matches == 2  # fuzzy ratio 100; "soft cotton" in the description


def test_type_reward_levels() -> None:
    other_query = replace(SHIRT, query="socks", product_category="Clothing › Women › Socks")
    assert type_reward(SHIRT, GOAL) == (1.0, True, True, 1.0)
    # Only the category path shares two levels (Clothing, Men is one level less here).
    assert type_reward(replace(other_query, product_category="Clothing › Men"), GOAL)[0] == 1.0
    goal_nouns = heuristic_nouns(GOAL.name)
    assert goal_nouns == ["northwind", "classic", "cotton", "t", "shirt", "crew", "neck"]
    one_of_seven = replace(other_query, title="Cotton Towel")
    assert type_reward(one_of_seven, GOAL) == (0.5, False, False, pytest.approx(1 / 7))
    nothing_shared = replace(other_query, title="Garden Hose")
    assert type_reward(nothing_shared, GOAL)[0] == 0.0
    few_shared = replace(GOAL, name=" ".join(f"Word{n}" for n in range(11)) + " Cotton")
    assert type_reward(replace(other_query, title="Cotton"), few_shared)[0] == 0.1


def test_goal_title_without_nouns_scores_point_two() -> None:
    goal = replace(GOAL, name="for the and")
    assert type_reward(SHIRT, goal)[3] == 0.2


def test_token_set_ratio_follows_thefuzz_processing() -> None:
    assert token_set_ratio("fuzzy was a bear", "fuzzy fuzzy was a bear") == 100
    assert token_set_ratio("Machine-Wash!", "machine wash") == 100
    assert token_set_ratio("", "anything") == 0
    assert token_set_ratio("pack of 12", "pack of 2") > 85


def test_token_set_ratio_is_thefuzz_0_19_on_its_edge_cases() -> None:
    # Values from thefuzz 0.19.0 itself (WebShop's pin, scoring with difflib).
    assert token_set_ratio("日本", "日本") == 100  # only U+0080-U+00FF are dropped
    assert token_set_ratio("café", "caf") == 100
    assert token_set_ratio("a_b", "a b") == 67  # "_" is a word character
    assert token_set_ratio("pack of 12", "pack of 21") == 90
    assert token_set_ratio("x-small", "small") == 100
    # thefuzz's own token-set steps on difflib: rapidfuzz's token_set_ratio says 89.
    assert token_set_ratio("cotton black oz fl", "aotcon black oz fl") == 83


def test_normalize_color_takes_the_first_listed_colour_word() -> None:
    assert normalize_color("navy blue") == "blue"
    assert normalize_color("heather grey") == "grey"
    assert normalize_color("large") == "large"


def test_noun_extractor_agrees_with_spacy_on_a_webshop_title() -> None:
    # spaCy's tags for this title (from AgentBench's WebShop example): every word but
    # "By", "for" and the number is NOUN or PROPN.
    title = "L'eau D'issey By Issey Miyake for MenEau De Toilette Spray, 6.7 Fl Oz Bottle"
    assert heuristic_nouns(title) == [
        "l'eau",
        "d'issey",
        "issey",
        "miyake",
        "meneau",
        "de",
        "toilette",
        "spray",
        "fl",
        "oz",
        "bottle",
    ]
    assert heuristic_nouns("long lasting and beautiful soap") == ["long", "soap"]
