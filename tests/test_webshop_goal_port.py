"""WebShop's own reward tests, case for case, against our reward.

Ported from ``tests/web-agent-site/engine/test_goal.py`` of princeton-nlp/WebShop at
commit 64fa2a5c15c7daa698b9ac93f5bb5437b634c9bd (the commit AgentBench builds): the
same inputs and the same expected values. WebShop's dicts become our :class:`Product`
and :class:`Goal`; where a field has another name or shape here, the comment says how
it maps. WebShop's ``get_type_reward``/``get_attribute_reward``/``get_option_reward``
are our :func:`type_reward`/:func:`attribute_matches`/:func:`option_matches`, and
their ratios (``r_attr``, ``r_option``) are read from :func:`get_reward`'s breakdown.

The title-score cases depend on the noun tagger: WebShop's expected values are spaCy's.
They run here against the download-free extractor; two of them differ and are marked
strict ``xfail`` with the values it gives, so a change in either direction is seen.
``benchmarks/bench_webshop.py`` runs the same cases through spaCy when a pipeline is
importable and records the scores in ``benchmarks/results/webshop.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from math import isclose
from typing import Any

import pytest

from agentgym_eppo.environments.webshop.catalog import Product
from agentgym_eppo.environments.webshop.nouns import NounExtractor, heuristic_nouns
from agentgym_eppo.environments.webshop.reward import (
    Goal,
    RewardBreakdown,
    attribute_matches,
    get_reward,
    option_matches,
    type_reward,
)


def product(**fields: Any) -> Product:
    """A product with WebShop's test fields; everything the test leaves out is empty."""
    defaults: dict[str, Any] = {
        "asin": "B000000000",
        "title": "",
        "category": "",
        "query": "",
        "product_category": "",
        "description": "",
        "bullet_points": (),
        "attributes": (),
        "options": {},
        "price": 0.0,
        "price_tag": "",
    }
    return Product(**{**defaults, **fields})


def goal(**fields: Any) -> Goal:
    defaults: dict[str, Any] = {
        "asin": "B000000000",
        "instruction_text": "",
        "attributes": (),
        "options": (),
        "price_upper": 1_000_000.0,
        "query": "",
        "category": "",
        "product_category": "",
        "name": "",
    }
    return Goal(**{**defaults, **fields})


# ---------------------------------------------------------------- test_get_type_reward


def test_get_type_reward_query_and_category() -> None:
    # Exact Match
    wanted = goal(query="Query 1", product_category="a › b › c", name="Name 1")
    # WebShop's product 'name' is its 'Title' (load_products sets one from the other).
    purchased = product(query="Query 1", product_category="a › b › c", title="Name 1")
    r_type, query_match, category_match, title_score = type_reward(purchased, wanted)
    assert r_type == 1.0
    assert query_match is True
    assert category_match is True
    assert title_score == 1

    # Query Mismatch
    purchased = product(query="Query 2", product_category="a › b › c", title="Name 1")
    assert type_reward(purchased, wanted)[1] is False

    # Out of order / non-matching / partially matching / duplicate categories
    for path, expected in [
        ("b › c › a", True),
        ("d › e › f", False),
        ("a › d › b", True),
        ("a › a › b", True),
        ("a › a › d", False),
    ]:
        purchased = product(query="Query 2", product_category=path, title="Name 1")
        assert type_reward(purchased, wanted)[2] is expected, path


SHOES = (
    "Mens D.O.N. Issue 2 Gca Basketball Sneakers Shoes Casual - Off White",
    "PEAK High Top Mens Basketball Shoes Lou Williams Streetball Master Breathable "
    "Non Slip Outdoor Sneakers",
)
CORD_LONG = (
    "Saireed UL Listed 2 Prong Power Cord for JBL Bar 3.1 Bar 2.1 Channel 4K Ultra HD "
    "Soundbar Home Theater System Subwoofer",
    "BRST AC Power Cord Outlet Socket Cable Plug Lead for Panasonic SC-HT830V DVD/VCR "
    "Combo Home Theater System",
)
CORD_SHORT = (
    "Saireed UL Listed 2 Prong Power Cord for JBL Bar 3.1 Bar 2.1 Channel 4K Ultra HD Soundbar",
    CORD_LONG[1],
)
KNOB = (
    "Rusticware 921ORB Kitchen and Bath Cabinet Knob",
    "Minkissy 2pcs Stainless Steel Eyebrow Tweezers Blackhead Acne Remover Portable "
    "Makeup Tweezers (Silver)",
)


def title_score(names: tuple[str, str], nouns: NounExtractor) -> float:
    wanted = goal(query="Query 1", product_category="a › b › c", name=names[0])
    purchased = product(query="Query 2", product_category="a › a › d", title=names[1])
    return type_reward(purchased, wanted, nouns)[3]


def check_title_score(names: tuple[str, str], expected: float, nouns: NounExtractor) -> None:
    score = title_score(names, nouns)
    if expected == 0.05:  # WebShop asserts "< 0.05" for completely different names
        assert score < 0.05
    else:
        assert isclose(score, expected, abs_tol=1e-2), score


HEURISTIC_DIFFERS = "download-free nouns: {} of the goal's {} nouns shared ({:.3f}); spaCy's: {}"
TITLE_CASES = [
    pytest.param(
        SHOES,
        0.333,
        id="similar-names",
        marks=pytest.mark.xfail(strict=True, reason=HEURISTIC_DIFFERS.format(4, 11, 4 / 11, 0.333)),
    ),
    pytest.param(
        CORD_LONG,
        0.3,
        id="slightly-similar-long",
        marks=pytest.mark.xfail(strict=True, reason=HEURISTIC_DIFFERS.format(5, 18, 5 / 18, 0.3)),
    ),
    pytest.param(CORD_SHORT, 0.15, id="slightly-similar-short"),
    pytest.param(KNOB, 0.05, id="completely-different"),
]


@pytest.mark.parametrize(("names", "expected"), TITLE_CASES)
def test_get_type_reward_title_score_download_free(names: tuple[str, str], expected: float) -> None:
    check_title_score(names, expected, heuristic_nouns)


# ----------------------------------------------------------- test_get_attribute_reward


def attribute_reward(purchased: Product, attributes: Sequence[str]) -> tuple[float, int]:
    """WebShop's ``(r_attr, num_attr_matches)``, from our breakdown."""
    breakdown = get_reward(purchased, goal(attributes=tuple(attributes)), 0.0, {})
    assert breakdown.num_attr_matches == attribute_matches(purchased, attributes)
    return breakdown.r_att, breakdown.num_attr_matches


GOAL_ATTRIBUTES = ("tea tree", "essential oils", "natural ingredients")


def test_get_attribute_reward() -> None:
    # Exact Match
    purchased = product(attributes=("tea tree", "essential oil", "natural ingredients"))
    assert attribute_reward(purchased, GOAL_ATTRIBUTES) == (1, 3)

    # Partial Match
    purchased = product(attributes=("essential oil", "natural ingredients"))
    assert attribute_reward(purchased, GOAL_ATTRIBUTES) == (2.0 / 3.0, 2)

    # Goal attributes found in purchased non-goals
    purchased = product(
        bullet_points=("This shampoo has essential oils and smells like lemons",),
        description="Best shampoo on the market, made with natural ingredients",
    )
    assert attribute_reward(purchased, GOAL_ATTRIBUTES) == (2.0 / 3.0, 2)

    # No match
    purchased = product(
        attributes=("tea bag", "earl gray", "lipton"),
        title="English tea for breakfast",
        bullet_points=("Soothing aroma", "Calming, great feeling"),
        description="Best tea made by Lipton, great to pair with breakfast",
    )
    assert attribute_reward(purchased, GOAL_ATTRIBUTES) == (0, 0)


# -------------------------------------------------------------- test_get_option_reward


def option_reward(purchased: list[str], goal_options: list[str]) -> tuple[float | None, int]:
    """WebShop's ``get_option_reward(purchased, goal)``: ``(r_option, num_option_matches)``."""
    chosen = {f"group{i}": value for i, value in enumerate(purchased)}
    breakdown = get_reward(product(), goal(options=tuple(goal_options)), 0.0, chosen)
    assert breakdown.num_option_matches == option_matches(goal_options, purchased)
    return breakdown.r_option, breakdown.num_option_matches


def test_get_option_reward() -> None:
    # Exact Match
    wanted = ["grey", "XL", "pack of 12"]
    r_option, matches = option_reward(["pack of 12", "grey", "XL"], wanted)
    assert matches == len(wanted)
    assert r_option == 1

    # Partial Match
    r_option, matches = option_reward(["pack of 12", "blue", "XL"], wanted)
    assert matches == len(wanted) - 1
    assert r_option == 2.0 / 3.0

    # Fuzzy Match
    wanted = ["cool powder snow", "XL", "pack of 12"]
    r_option, matches = option_reward(["pack of 12", "powder snow", "XL"], wanted)
    assert matches == len(wanted)
    assert r_option == 1

    # Empty Goal Options
    r_option, matches = option_reward(["goal 1", "goal 2"], [])
    assert matches == 0
    assert r_option is None

    # Empty Purchased Options
    r_option, matches = option_reward([], ["goal 1", "goal 2"])
    assert matches == 0
    assert r_option == 0


# --------------------------------------------------------------------- test_get_reward


def test_get_reward() -> None:
    name = SHOES[0]
    # WebShop's goal_options here is a dict; its get_reward then compares the chosen
    # values with the (name, value) pairs, which scores these cases as values do.
    chosen = {"color": "grey", "size": "XL"}
    wanted = goal(
        query="Query 1",
        product_category="a › b › c",
        name=name,
        attributes=GOAL_ATTRIBUTES,
        options=("grey", "XL"),
        price_upper=40.00,
    )
    # WebShop's purchased dict has 'name' (the type reward's title) and an empty 'Title'
    # (the attribute reward's); here one title does both, and it holds none of the
    # goal attributes, so the attribute reward reads it as WebShop reads the empty one.
    purchased = product(
        query="Query 1",
        product_category="a › b › c",
        title=name,
        attributes=("tea tree", "essential oil", "natural ingredients"),
    )

    # Exact Match
    assert get_reward(purchased, wanted, 35, chosen).reward == 1

    # Variation in r_attributes reward
    purchased = product(
        query="Query 1",
        product_category="a › b › c",
        title=name,
        # WebShop's test passes a string as 'BulletPoints', and ' '.join() spaces out its
        # characters: its tuple of characters here reads the same.
        bullet_points=tuple("This shampoo has essential oils and smells like lemons"),
        description="Best shampoo on the market, made with natural ingredients",
    )
    assert isclose(get_reward(purchased, wanted, 35, chosen).reward, 2.0 / 3.0, abs_tol=1e-2)

    # Variation in r_option reward
    wanted = replace(wanted, options=("grey", "XL", "pack of 12"))
    assert isclose(get_reward(purchased, wanted, 35, chosen).reward, 0.5714, abs_tol=1e-2)

    # Variation in r_type reward
    wanted = replace(wanted, name=CORD_SHORT[0])
    purchased = replace(
        purchased, title=CORD_SHORT[1], query="Query 2", product_category="a › d › e"
    )
    result: RewardBreakdown = get_reward(purchased, wanted, 35, chosen)
    assert isclose(result.reward, 0.2857, abs_tol=1e-2)
