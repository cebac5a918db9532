"""Products: what the shop sells, in the shape WebShop's engine gives them after loading.

A :class:`Product` holds exactly the fields that WebShop's pages, search index and
reward read (``Title``, ``BulletPoints``, ``Description``, ``Attributes``, ``options``,
``Price``, ``Rating``, ``Reviews``, ``category``, ``query``, ``product_category``), with
Python names. Two sources produce them: the project's shipped catalog (JSON lines
written by :mod:`.generator`) and the original WebShop product files (see
:mod:`.original`). A :class:`Catalog` is the ordered collection with lookup by ASIN.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agentgym_eppo.core import TaskFormatError, asset_path, read_json_or_jsonl

SHIPPED_PRODUCTS = "products.jsonl.gz"


@dataclass(frozen=True)
class Review:
    """One customer review: its title, star score (1-5) and text."""

    title: str
    score: int
    body: str


@dataclass(frozen=True)
class Product:
    """One product as WebShop's engine holds it after ``load_products``.

    ``options`` maps an option group (``"size"``, ``"color"``) to its values, lower-cased
    as WebShop lower-cases them; ``price`` is the price the reward compares with the
    cap (WebShop draws it once per product inside the listed range), ``price_tag`` the
    text the pages show (``"$12.99"`` or ``"$10.0 to $20.0"``). ``brand`` and
    ``product_type`` (the product noun) are the generator's, for writing instructions;
    products from WebShop's files leave them empty.
    """

    asin: str
    title: str
    category: str
    query: str
    product_category: str
    description: str
    bullet_points: tuple[str, ...]
    attributes: tuple[str, ...]
    options: Mapping[str, tuple[str, ...]]
    price: float
    price_tag: str
    rating: str = "N.A."
    reviews: tuple[Review, ...] = ()
    brand: str = ""
    product_type: str = ""

    def search_text(self) -> str:
        """The text WebShop indexes: title, description, first bullet point and options."""
        option_text = ", and ".join(
            f"{name}: {', '.join(values)}" for name, values in self.options.items()
        )
        first_bullet = self.bullet_points[0] if self.bullet_points else ""
        return " ".join([self.title, self.description, first_bullet, option_text]).lower()

    def to_json(self) -> dict[str, Any]:
        row = asdict(self)
        row["options"] = {name: list(values) for name, values in self.options.items()}
        return row

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> Product:
        """Build a product from a row of the shipped catalog; names the missing field."""
        try:
            return cls(
                asin=str(row["asin"]),
                title=str(row["title"]),
                category=str(row["category"]),
                query=str(row["query"]),
                product_category=str(row["product_category"]),
                description=str(row["description"]),
                bullet_points=tuple(str(b) for b in row["bullet_points"]),
                attributes=tuple(str(a) for a in row["attributes"]),
                options={str(k): tuple(str(v) for v in vs) for k, vs in row["options"].items()},
                price=float(row["price"]),
                price_tag=str(row["price_tag"]),
                rating=str(row.get("rating", "N.A.")),
                reviews=tuple(
                    Review(str(r["title"]), int(r["score"]), str(r["body"]))
                    for r in row.get("reviews", ())
                ),
                brand=str(row.get("brand", "")),
                product_type=str(row.get("product_type", "")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise TaskFormatError(
                f"product {row.get('asin', '?')!r}: bad or missing field ({error!r})"
            ) from error


class Catalog:
    """The products of one shop, in a fixed order, with lookup by upper-case ASIN."""

    def __init__(self, products: Iterable[Product], *, name: str = "catalog") -> None:
        self.products: tuple[Product, ...] = tuple(products)
        if not self.products:
            raise TaskFormatError(f"{name}: no products")
        self._by_asin = {product.asin: product for product in self.products}
        if len(self._by_asin) != len(self.products):
            raise TaskFormatError(f"{name}: duplicate ASINs")
        self.name = name
        self._fingerprint: str | None = None

    def __len__(self) -> int:
        return len(self.products)

    def __iter__(self) -> Iterator[Product]:
        return iter(self.products)

    def __contains__(self, asin: object) -> bool:
        return isinstance(asin, str) and asin.upper() in self._by_asin

    def get(self, asin: str) -> Product:
        """The product with ``asin`` (any case); ``KeyError`` if the shop has none."""
        try:
            return self._by_asin[asin.upper()]
        except KeyError:
            raise KeyError(f"{self.name}: no product {asin!r}") from None

    @property
    def fingerprint(self) -> str:
        """A hash of the searchable text, naming a cached search index."""
        if self._fingerprint is None:
            digest = hashlib.sha256()
            for product in self.products:
                digest.update(product.asin.encode())
                digest.update(product.search_text().encode("utf-8"))
            self._fingerprint = digest.hexdigest()[:20]
        return self._fingerprint

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]], *, name: str = "catalog") -> Catalog:
        return cls((Product.from_json(row) for row in rows), name=name)

    @classmethod
    def load(cls, path: str | Path) -> Catalog:
        """Load a catalog written by :func:`write_catalog` (JSON lines, gzipped or not)."""
        return cls.from_rows(read_json_or_jsonl(path), name=str(path))


def shipped_catalog_path() -> Path:
    return asset_path("webshop", SHIPPED_PRODUCTS)


@functools.lru_cache(maxsize=1)
def shipped_catalog() -> Catalog:
    """The project's own catalog (loaded once per process: every env shares it)."""
    return Catalog.load(shipped_catalog_path())


def product_rows(products: Iterable[Product]) -> Iterator[dict[str, Any]]:
    for product in products:
        yield product.to_json()
