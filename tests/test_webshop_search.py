"""BM25 search with tantivy: ranking, hostile keywords, the on-disk cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgym_eppo.environments.webshop.catalog import Catalog, shipped_catalog
from agentgym_eppo.environments.webshop.search import (
    MAX_QUERY_TERMS,
    SearchEngine,
    clear_memory_cache,
    query_terms,
)


@pytest.fixture(scope="module")
def engine() -> SearchEngine:
    return SearchEngine(shipped_catalog())


def test_best_match_ranks_first_and_fifty_at_most(engine: SearchEngine) -> None:
    product = engine.catalog.products[123]
    hits = engine.search(product.title)
    assert hits[0] == product.asin and len(hits) == 50
    assert engine.search(product.title, k=5) == hits[:5]


def test_stemming_matches_plural_and_singular(engine: SearchEngine) -> None:
    assert set(engine.search("pillow covers", 10)) == set(engine.search("pillow cover", 10))


def test_search_is_deterministic_including_ties(engine: SearchEngine) -> None:
    again = SearchEngine(Catalog(engine.catalog.products, name="copy"))
    for keywords in ("black", "pack of 2", "gluten free protein bar"):
        assert engine.search(keywords) == again.search(keywords)


@pytest.mark.parametrize(
    "keywords",
    [
        '"unbalanced quote',
        "color:black",
        "AND",
        "shampoo AND OR NOT",
        "[bracket] (paren {brace}",
        "title:* ~2 ^3 +must -not",
        "\\ / ; ' ` !",
        "ünïcödé 中文 ✓ émoji 🙂",
    ],
)
def test_query_syntax_is_searched_as_words_never_raises(
    engine: SearchEngine, keywords: str
) -> None:
    hits = engine.search(keywords)
    assert isinstance(hits, list) and len(hits) <= 50


def test_query_terms_keep_words_and_drop_syntax() -> None:
    assert query_terms('"Shampoo" AND color:black (x)') == ["shampoo", "and", "color", "black", "x"]
    assert query_terms("café ünïcode") == ["café", "ünïcode"]
    assert query_terms("!!! ::: ---") == []


def test_empty_and_huge_searches(engine: SearchEngine) -> None:
    assert engine.search("") == [] and engine.search("   ") == [] and engine.search("?!") == []
    huge = " ".join(f"word{n}" for n in range(3000)) + " shampoo"
    assert len(huge) > 10_000
    assert len(query_terms(huge)) == MAX_QUERY_TERMS
    assert engine.search("shampoo " * 2000)[:5] == engine.search("shampoo")[:5]


def test_disk_cache_is_reused_across_engines(tmp_path: Path) -> None:
    products = shipped_catalog().products[:300]
    catalog = Catalog(products, name="cached")
    first = SearchEngine(catalog, cache_dir=tmp_path)
    folder = tmp_path / f"webshop-{catalog.fingerprint}"
    assert (folder / "COMPLETE").exists()
    clear_memory_cache()
    reopened = SearchEngine(Catalog(products, name="cached again"), cache_dir=tmp_path)
    assert reopened.search("face moisturizer") == first.search("face moisturizer")
