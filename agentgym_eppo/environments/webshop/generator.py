"""Generate the shipped WebShop catalog and its instructions (``python -m`` this module).

Products are written from :mod:`.vocabulary` (31 product types in WebShop's five
categories, 41 brands): a title naming brand, descriptor, product noun and some
attributes; bullet points and a description that state every attribute; option groups
with 2-6 values; a price in the type's range; a rating and up to three reviews.

Goals follow WebShop's human instructions: an instruction naming attributes, one value
of every option group and a price cap, with the goal product recorded. The cap is
WebShop's: two of the next four multiples of ten above the price are drawn and the
larger is the cap. Each goal also records ``search_query``, the keywords the expert
searches; the generator checks with the real index that the goal product is among the
top 50 results for it (falling back to the product title), so every shipped goal is
solvable by :mod:`.expert`.

Everything is drawn from ``random.Random(seed)``: the same seed writes the same bytes.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentgym_eppo.core import asset_path, write_jsonl_gz

from .catalog import SHIPPED_PRODUCTS, Catalog, Product, Review, product_rows
from .search import SEARCH_RETURN_N, SearchEngine
from .tasks import PRICE_STEPS, price_cap
from .vocabulary import (
    BRANDS,
    INSTRUCTION_OPENERS,
    PRODUCT_TYPES,
    REVIEW_BODIES,
    REVIEW_TITLES,
    ProductType,
)

DEFAULT_SEED = 20260
DEFAULT_PRODUCTS = 5_200
SPLIT_SIZES = {"test": 200, "dev": 200, "train": 1_000}
_ASIN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def generate_products(count: int = DEFAULT_PRODUCTS, seed: int = DEFAULT_SEED) -> list[Product]:
    """``count`` products, deterministic in ``seed``."""
    rng = random.Random(seed)
    asins: set[str] = set()
    products = []
    for position in range(count):
        kind = PRODUCT_TYPES[position % len(PRODUCT_TYPES)]
        asin = _new_asin(rng, asins)
        products.append(_product(rng, asin, kind))
    return products


def _new_asin(rng: random.Random, taken: set[str]) -> str:
    while True:
        asin = "B0" + "".join(rng.choice(_ASIN_CHARS) for _ in range(8))
        if asin not in taken:
            taken.add(asin)
            return asin


def _product(rng: random.Random, asin: str, kind: ProductType) -> Product:
    brand = rng.choice(BRANDS)
    descriptor = rng.choice(kind.descriptors)
    attributes = rng.sample(kind.attributes, rng.randint(3, 5))
    options = _options(rng, kind)
    shown = [attribute.title() for attribute in attributes[: rng.randint(1, 2)]]
    title = f"{brand} {descriptor} {kind.noun.title()}, {', '.join(shown)}"
    if rng.random() < 0.5:
        title += f" - {rng.choice(('Everyday', 'Premium', 'Value', 'Classic', 'New'))} Edition"
    low, high = kind.price_range
    price = round(rng.uniform(low, high), 2)
    tails = ("made to last", "tested for quality", "a customer favorite", "designed for daily use")
    bullets = tuple(
        f"{attribute.upper()}: {brand}'s {kind.noun}, {attribute}, {rng.choice(tails)}."
        for attribute in attributes
    )
    closers = (
        "Backed by our satisfaction promise.",
        "Ships in recyclable packaging.",
        "Loved by thousands of customers.",
        "A smart choice for any home.",
    )
    description = (
        f"The {brand} {descriptor.lower()} {kind.noun}: {', '.join(attributes[:-1])} "
        f"and {attributes[-1]}. {rng.choice(closers)}"
    )
    reviews = tuple(
        Review(
            title=rng.choice(REVIEW_TITLES),
            score=rng.randint(1, 5),
            body=rng.choice(REVIEW_BODIES).format(noun=kind.noun),
        )
        for _ in range(rng.randint(0, 3))
    )
    rating = "N.A." if not reviews else f"{sum(r.score for r in reviews) / len(reviews):.1f}"
    return Product(
        asin=asin,
        title=title,
        category=kind.category,
        query=kind.query,
        product_category=kind.path,
        description=description,
        bullet_points=bullets,
        attributes=tuple(attributes),
        options=options,
        price=price,
        price_tag=f"${price:.2f}",
        rating=rating,
        reviews=reviews,
        brand=brand,
        product_type=kind.noun,
    )


def _options(rng: random.Random, kind: ProductType) -> dict[str, tuple[str, ...]]:
    groups = list(kind.options)
    if len(groups) > 1 and rng.random() < 0.25:
        groups = rng.sample(groups, 1)
    if rng.random() < 0.08:
        groups = []
    options = {}
    for group in groups:
        pool = kind.options[group]
        count = rng.randint(min(2, len(pool)), min(6, len(pool)))
        options[group] = tuple(sorted(rng.sample(pool, count), key=pool.index))
    return options


def generate_goals(
    catalog: Catalog,
    engine: SearchEngine,
    sizes: dict[str, int] | None = None,
    seed: int = DEFAULT_SEED,
) -> dict[str, list[dict[str, Any]]]:
    """Goals per split, each for a different product, each solvable by the expert."""
    sizes = dict(SPLIT_SIZES if sizes is None else sizes)
    rng = random.Random(seed + 1)
    products = list(catalog)
    rng.shuffle(products)
    chosen = iter(products)
    goals: dict[str, list[dict[str, Any]]] = {}
    for split, size in sizes.items():
        goals[split] = [
            _goal(rng, engine, product, f"webshop-{split}-{k}")
            for k, product in zip(range(size), _with_cap(chosen), strict=False)
        ]
    return goals


def _with_cap(products: Iterator[Product]) -> Iterator[Product]:
    for product in products:
        if product.price < PRICE_STEPS[-2]:
            yield product


def _goal(
    rng: random.Random, engine: SearchEngine, product: Product, sample_id: str
) -> dict[str, Any]:
    attributes = rng.sample(product.attributes, min(len(product.attributes), rng.randint(1, 3)))
    goal_options = {group: rng.choice(values) for group, values in product.options.items()}
    cap = price_cap(rng, product.price)
    noun = product.product_type or product.query
    brand = product.brand.lower() if rng.random() < 0.4 else ""
    text = f"{rng.choice(INSTRUCTION_OPENERS)} {'a ' if rng.random() < 0.5 else ''}"
    text += f"{attributes[0]} {brand + ' ' if brand else ''}{noun}"
    if len(attributes) > 1:
        text += " that is " + " and ".join(attributes[1:])
    if goal_options:
        text += " with " + ", and ".join(f"{g}: {v}" for g, v in goal_options.items())
    if cap is not None:
        text += f", and price lower than {cap:.2f} dollars"
    keywords = " ".join([*attributes, brand, noun, *goal_options.values()]).split()
    search_query = " ".join(keywords)
    if product.asin not in engine.search(search_query, SEARCH_RETURN_N):
        search_query = product.title.lower()
    return {
        "sample_id": sample_id,
        "asin": product.asin,
        "instruction_text": text,
        "attributes": attributes,
        "goal_options": goal_options,
        "price_upper": cap if cap is not None else 1_000_000.0,
        "query": product.query,
        "category": product.category,
        "product_category": product.product_category,
        "name": product.title,
        "search_query": search_query,
    }


def write_assets(folder: Path, count: int = DEFAULT_PRODUCTS, seed: int = DEFAULT_SEED) -> None:
    """Write ``products.jsonl.gz`` and ``goals_<split>.jsonl.gz`` into ``folder``."""
    catalog = Catalog(generate_products(count, seed), name="generated")
    engine = SearchEngine(catalog)
    write_jsonl_gz(folder / SHIPPED_PRODUCTS, product_rows(catalog))
    for split, rows in generate_goals(catalog, engine, seed=seed).items():
        write_jsonl_gz(folder / f"goals_{split}.jsonl.gz", rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=asset_path("webshop"))
    parser.add_argument("--products", type=int, default=DEFAULT_PRODUCTS)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    write_assets(args.out, args.products, args.seed)


if __name__ == "__main__":
    main()
