"""The shipped catalog and goals, their generator, and loading WebShop's original files."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from support.webshop_support import play

from agentgym_eppo.core import TaskFormatError, asset_path, read_json_or_jsonl
from agentgym_eppo.environments.webshop.catalog import shipped_catalog
from agentgym_eppo.environments.webshop.env import WebShopEnv
from agentgym_eppo.environments.webshop.generator import generate_products, write_assets
from agentgym_eppo.environments.webshop.original import load_original
from agentgym_eppo.environments.webshop.pages import SUB_PAGES
from agentgym_eppo.environments.webshop.tasks import load_goal_set

BUTTONS = {"search", "back to search", "< prev", "next >", "buy now"} | {
    page.lower() for page in SUB_PAGES
}


def test_shipped_catalog_is_large_and_well_formed() -> None:
    catalog = shipped_catalog()
    assert len(catalog) >= 5000
    categories = {product.category for product in catalog}
    assert categories == {"beauty", "food", "fashion", "furniture", "electronics"}
    for product in catalog:
        assert " › " in product.product_category and product.price > 0
        assert product.bullet_points and product.attributes and product.description
        values = [value for group in product.options.values() for value in group]
        assert len(values) == len(set(values)), product.asin
        assert not BUTTONS & set(values) and all(value == value.lower() for value in values)


def test_shipped_goals_have_the_promised_sizes_and_products() -> None:
    catalog = shipped_catalog()
    seen: set[str] = set()
    for split, size in (("train", 1000), ("dev", 200), ("test", 200)):
        goals = load_goal_set(None, split)
        assert len(goals) == size
        for record in goals:
            product = catalog.get(record.goal.asin)
            assert record.goal.name == product.title and record.goal.attributes
            assert f"price lower than {record.goal.price_upper:.2f} dollars" in record.instruction
            assert set(record.goal.options) <= {v for vs in product.options.values() for v in vs}
            seen.add(record.goal.asin)
    assert len(seen) == 1400


def test_generator_rewrites_the_shipped_files_byte_for_byte(tmp_path: Path) -> None:
    write_assets(tmp_path)
    for path in sorted(asset_path("webshop").glob("*.jsonl.gz")):
        assert (tmp_path / path.name).read_bytes() == path.read_bytes(), path.name


def test_generator_depends_only_on_the_seed() -> None:
    assert generate_products(50, seed=3) == generate_products(50, seed=3)
    assert generate_products(50, seed=3) != generate_products(50, seed=4)


def test_goal_files_in_our_format_load_from_a_path_or_rows(tmp_path: Path) -> None:
    rows = read_json_or_jsonl(asset_path("webshop", "goals_test.jsonl.gz"))[:3]
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(rows))
    env = WebShopEnv(tasks=str(path))
    assert env.num_tasks == 3
    assert play(env, 2, lambda e: e.expert_action())[0] == 1.0
    assert WebShopEnv(tasks=rows[:1]).num_tasks == 1


def test_malformed_goal_rows_name_the_problem() -> None:
    with pytest.raises(TaskFormatError, match="missing field"):
        load_goal_set([{"asin": "B0X"}], "train")
    with pytest.raises(TaskFormatError, match="malformed goal"):
        load_goal_set(
            [
                {
                    "asin": "B0X",
                    "instruction_text": "x",
                    "attributes": [],
                    "goal_options": [],
                    "price_upper": "cheap",
                }
            ],
            "train",
        )


# ---------------------------------------------------------------- original files


def _original_product(asin: str, **changes: Any) -> dict[str, Any]:
    row = {
        "asin": asin,
        "name": f"Issey Miyake L'eau D'issey Eau de Toilette {asin}",
        "full_description": "A fresh aquatic fragrance.",
        "small_description": ["Long lasting", "Made in France"],
        "pricing": "$64.98",
        "customization_options": {
            "Size": [{"value": "2.5 Fl Oz", "image": None}, {"value": "6.76 fl oz (Pack of 1)"}],
            "Color": [{"value": "Navy/Blue", "image": "x.jpg"}],
        },
        "category": "beauty",
        "query": " Perfume For Men ",
        "product_category": "Beauty & Personal Care › Fragrance › Men's › Eau de Toilette",
        "images": ["main.jpg"],
    }
    row.update(changes)
    return row


@pytest.fixture
def webshop_data(tmp_path: Path) -> Path:
    """A WebShop ``data/`` folder in the original formats, with its quirks."""
    products = [
        _original_product("B000000001"),
        _original_product("B000000002", pricing="$10.00$20.00", customization_options=None),
        _original_product("B000000001"),  # repeated ASIN: skipped
        _original_product("nan"),  # bad ASIN: skipped
        _original_product("B000000003", pricing=""),
    ]
    attributes = {
        "B000000001": {
            "attributes": ["long lasting"],
            "instruction": "i need a long lasting eau de toilette",
            "instruction_attributes": ["long lasting"],
        },
        "B000000002": {"attributes": ["made in france"]},
    }
    human = {
        "B000000001": [
            {
                "instruction": "i need a long lasting 6.76 fl oz bottle of l'eau d'issey.",
                "instruction_attributes": ["long lasting"],
                "instruction_options": ["6.76 fl oz (pack of 1)"],
            },
            {"instruction": "no attributes: skipped", "instruction_attributes": []},
        ],
        "B000000003": [
            {
                "instruction": "i want an aquatic perfume",
                "instruction_attributes": ["aquatic"],
                "instruction_options": [],
            }
        ],
    }
    reviews = [
        {
            "asin": "B000000001",
            "average_rating": 4.5,
            "reviews": [{"title": "Lovely", "stars": "5", "review": "Smells great."}],
        }
    ]
    files = {
        "items_shuffle_1000.json": products,
        "items_ins_v2_1000.json": attributes,
        "items_human_ins.json": human,
        "reviews.json": reviews,
    }
    for name, content in files.items():
        (tmp_path / name).write_text(json.dumps(content))
    return tmp_path


def test_original_products_load_as_webshop_converts_them(webshop_data: Path) -> None:
    data = load_original(webshop_data)
    assert [p.asin for p in data.catalog] == ["B000000001", "B000000002", "B000000003"]
    first, ranged, unpriced = data.catalog.products
    assert first.options == {
        "size": ("2.5 fl oz", "6.76 fl oz (pack of 1)"),
        "color": ("navy | blue",),
    }
    assert (first.price, first.price_tag, first.rating) == (64.98, "$64.98", "4.5")
    assert first.reviews[0].score == 5 and first.reviews[0].body == "Smells great."
    assert first.query == "perfume for men" and first.attributes == ("long lasting",)
    assert 10.0 <= ranged.price <= 20.0 and ranged.price_tag == "$10.0 to $20.0"
    assert ranged.options == {}
    assert (unpriced.price, unpriced.price_tag, unpriced.attributes) == (
        100.0,
        "$100.0",
        ("DUMMY_ATTR",),
    )


def test_original_human_goals_follow_webshops_construction(webshop_data: Path) -> None:
    data = load_original(webshop_data)
    assert len(data.goals) == 2
    assert load_original(webshop_data).goals == data.goals  # the price caps are seeded
    by_asin = {goal["asin"]: goal for goal in data.goals}
    goal = by_asin["B000000001"]
    assert goal["instruction_text"].startswith(
        "i need a long lasting 6.76 fl oz bottle of l'eau d'issey, and price lower than "
    )
    assert goal["price_upper"] in (80.0, 90.0, 100.0)
    assert goal["goal_options"] == ["6.76 fl oz (pack of 1)"]
    unshuffled = [by_asin["B000000001"], by_asin["B000000003"]]
    random.Random(233).shuffle(unshuffled)
    assert [g["asin"] for g in data.goals] == [g["asin"] for g in unshuffled]
    assert [g["sample_id"] for g in data.goals] == ["webshop-original-0", "webshop-original-1"]


def test_original_synthetic_goals_enumerate_option_combinations(webshop_data: Path) -> None:
    goals = load_original(webshop_data, human_goals=False).goals
    assert len(goals) == 2  # B000000001: 2 sizes x 1 colour
    texts = sorted(goal["instruction_text"] for goal in goals)
    assert texts[0].startswith(
        "i need a long lasting eau de toilette with color: navy | blue, and size: 2.5 fl oz, "
        "and price lower than "
    )


def test_env_plays_the_original_files_with_data_dir(webshop_data: Path) -> None:
    env = WebShopEnv(split="test", data_dir=webshop_data)
    assert env.num_tasks == 2
    for index in range(2):
        reward, info = play(env, index, lambda e: e.expert_action())
        assert reward == 1.0, info


def test_missing_original_files_are_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError, match=r"needs items_shuffle\[_1000\]\.json"):
        WebShopEnv(data_dir=tmp_path)
