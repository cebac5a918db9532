"""Load the original WebShop data files as they are, with WebShop's goal construction.

``data_dir`` is WebShop's ``data/`` folder. Products come from ``items_shuffle.json``
(the full set) or else ``items_shuffle_1000.json``; attributes and synthetic
instructions from ``items_ins_v2.json`` or else ``items_ins_v2_1000.json``; human
instructions from ``items_human_ins.json``; reviews from ``reviews.json`` when present.
The product conversion is WebShop's ``load_products``: bad or repeated ASINs skipped,
price ranges parsed from ``"$a$b"``, option values stripped, ``/`` -> `` | ``,
lower-cased, a missing attribute list replaced by ``DUMMY_ATTR``.

Goals are WebShop's ``get_human_goals`` (default; the set AgentBench evaluates) or
``get_synthetic_goals``, shuffled with WebShop's seed 233 so that index ``k`` is the
goal WebShop and AgentBench call ``k``. Splits follow WebShop's convention: test is
goals 0-499, dev 500-1499, train the rest.

Two departures, both because the original is not reproducible: WebShop draws each
price inside a range and each price cap from the unseeded global ``random``; here
both come from ``random.Random(seed)``, so they are the same on every load.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from agentgym_eppo.core import TaskFormatError

from .catalog import Catalog, Product, Review
from .tasks import price_cap

SPLIT_BOUNDS = {"test": (0, 500), "dev": (500, 1500), "train": (1500, None)}
GOAL_SHUFFLE_SEED = 233
NO_CAP = 1_000_000.0


@dataclass(frozen=True)
class OriginalData:
    """The catalog and the goal rows (all splits, in WebShop's shuffled order)."""

    catalog: Catalog
    goals: list[dict[str, Any]]

    def split(self, split: str) -> list[dict[str, Any]]:
        start, stop = SPLIT_BOUNDS[split]
        return self.goals[start:stop]


def _first_existing(folder: Path, *names: str) -> Path | None:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    return None


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as error:
        raise TaskFormatError(f"{path}: cannot read WebShop data ({error})") from error


def load_original(data_dir: str | Path, *, human_goals: bool = True, seed: int = 0) -> OriginalData:
    """Read WebShop's files from ``data_dir``; ``TaskFormatError`` names what is missing."""
    folder = Path(data_dir)
    products_path = _first_existing(folder, "items_shuffle.json", "items_shuffle_1000.json")
    attributes_path = _first_existing(folder, "items_ins_v2.json", "items_ins_v2_1000.json")
    if products_path is None or attributes_path is None:
        raise TaskFormatError(
            f"{folder}: WebShop data needs items_shuffle[_1000].json and "
            "items_ins_v2[_1000].json (from WebShop's setup.sh download)"
        )
    human_path = folder / "items_human_ins.json"
    if human_goals and not human_path.is_file():
        raise TaskFormatError(f"{folder}: human goals need items_human_ins.json")
    reviews_path = folder / "reviews.json"
    reviews = _read_json(reviews_path) if reviews_path.is_file() else []
    rng = random.Random(seed)
    products, raw = _products(_read_json(products_path), _read_json(attributes_path), reviews, rng)
    catalog = Catalog(products, name=str(products_path))
    if human_goals:
        goals = _human_goals(products, _read_json(human_path), rng)
    else:
        goals = _synthetic_goals(products, raw, rng)
    random.Random(GOAL_SHUFFLE_SEED).shuffle(goals)
    for index, goal in enumerate(goals):
        goal["sample_id"] = f"webshop-original-{index}"
    return OriginalData(catalog, goals)


def _parse_pricing(pricing: Any) -> list[float]:
    if not pricing or not isinstance(pricing, str):
        return []
    values = []
    for part in pricing.split("$")[1:]:
        try:
            values.append(float(Decimal(re.sub(r"[^\d.]", "", part))))
        except InvalidOperation:
            continue
    return values[:2]


def _products(
    rows: Any, attributes: Mapping[str, Any], reviews: Any, rng: random.Random
) -> tuple[list[Product], dict[str, Mapping[str, Any]]]:
    if not isinstance(rows, list):
        raise TaskFormatError("WebShop products file: expected a JSON list of products")
    reviews_by_asin = {r.get("asin"): r for r in reviews if isinstance(r, Mapping) and "asin" in r}
    products: list[Product] = []
    raw: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        asin = str(row.get("asin", "nan"))
        if asin == "nan" or len(asin) > 10 or asin in raw:
            continue
        raw[asin] = attributes.get(asin, {})
        pricing = _parse_pricing(row.get("pricing"))
        if not pricing:
            price, tag = 100.0, "$100.0"
        elif len(pricing) == 1:
            price, tag = pricing[0], f"${pricing[0]}"
        else:
            price, tag = rng.uniform(*pricing), f"${pricing[0]} to ${pricing[1]}"
        options: dict[str, tuple[str, ...]] = {}
        for name, contents in (row.get("customization_options") or {}).items():
            if contents is None:
                continue
            options[name.lower()] = tuple(
                str(c["value"]).strip().replace("/", " | ").lower() for c in contents
            )
        bullets = row.get("small_description") or []
        review_row = reviews_by_asin.get(asin, {})
        products.append(
            Product(
                asin=asin,
                title=str(row.get("name", "")),
                category=str(row.get("category", "")),
                query=str(row.get("query", "")).lower().strip(),
                product_category=str(row.get("product_category", "")),
                description=str(row.get("full_description") or ""),
                bullet_points=tuple(bullets) if isinstance(bullets, list) else (str(bullets),),
                attributes=tuple(raw[asin].get("attributes") or ["DUMMY_ATTR"]),
                options=options,
                price=price,
                price_tag=tag,
                rating=str(review_row.get("average_rating", "N.A.")),
                reviews=tuple(
                    Review(
                        str(r.get("title", "")),
                        int(float(r.get("score", r.get("stars", 0)) or 0)),
                        str(r.get("review", r.get("body", ""))),
                    )
                    for r in review_row.get("reviews", [])
                ),
            )
        )
    return products, raw


def _goal_row(
    product: Product, text: str, attributes: list[str], options: Any, cap: float | None
) -> dict[str, Any]:
    return {
        "asin": product.asin,
        "category": product.category,
        "query": product.query,
        "name": product.title,
        "product_category": product.product_category,
        "instruction_text": text
        + (f", and price lower than {cap:.2f} dollars" if cap is not None else ""),
        "attributes": attributes,
        "price_upper": cap if cap is not None else NO_CAP,
        "goal_options": options,
    }


def _human_goals(
    products: list[Product], human: Mapping[str, Any], rng: random.Random
) -> list[dict[str, Any]]:
    goals = []
    for product in products:
        for instruction in human.get(product.asin, []):
            attributes = instruction.get("instruction_attributes") or []
            if not attributes:
                continue
            cap = price_cap(rng, product.price)
            text = str(instruction["instruction"]).strip(".")
            goals.append(
                _goal_row(
                    product, text, attributes, instruction.get("instruction_options", []), cap
                )
            )
    return goals


def _synthetic_goals(
    products: list[Product], raw: Mapping[str, Mapping[str, Any]], rng: random.Random
) -> list[dict[str, Any]]:
    goals = []
    for product in products:
        info = raw.get(product.asin, {})
        text = info.get("instruction")
        attributes = info.get("instruction_attributes") or []
        if not text or not attributes:
            continue
        cap = price_cap(rng, product.price)
        names = sorted(product.options)
        for combination in itertools.product(*(product.options[name] for name in names)):
            chosen = dict(zip(names, combination, strict=True))
            option_text = ", and ".join(f"{k}: {v}" for k, v in chosen.items())
            full_text = f"{text} with {option_text}" if option_text else str(text)
            goals.append(_goal_row(product, full_text, attributes, chosen, cap))
    return goals
