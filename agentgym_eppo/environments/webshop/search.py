"""BM25 search over a catalog with tantivy, the engine WebShop's Lucene index is replaced by.

WebShop indexes each product's title, description, first bullet point and option text
(lower-cased) and returns the top 50 hits for the keywords. Here the same text goes
into a tantivy index with its English stemming tokenizer. tantivy's BM25 uses
k1 = 1.2, b = 0.75 (pyserini's defaults are 0.9 / 0.4), so rankings can differ from
the original's in detail; of the BM25 engines measured on this project's machines,
tantivy indexed and answered fastest.

Agents type anything, so keywords never reach tantivy's query parser as written:
they are cut into word tokens (letters and digits of any script), and those tokens
become a disjunction of terms. Quotes, colons, ``AND``, brackets or 10k characters
therefore search for their words or for nothing, and never raise.

An index is built once per catalog per process (about 0.1 s for 5,000 products) and,
with ``cache_dir``, stored on disk and reopened by the catalog's fingerprint.
"""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path

import tantivy

from .catalog import Catalog

SEARCH_RETURN_N = 50
"""How many hits a search returns (WebShop's ``SEARCH_RETURN_N``)."""
MAX_QUERY_TERMS = 64
"""Distinct query terms kept from one search; a longer search only repeats itself."""

_TOKEN = re.compile(r"[^\W_]+")
_WRITER_HEAP_BYTES = 64_000_000


def query_terms(keywords: str) -> list[str]:
    """The distinct lower-case word tokens of ``keywords``, in order, at most 64."""
    terms: list[str] = []
    for token in _TOKEN.findall(keywords.lower()):
        if token not in terms:
            terms.append(token)
            if len(terms) == MAX_QUERY_TERMS:
                break
    return terms


class SearchEngine:
    """Top-k BM25 search returning ASINs, best first (ties broken by catalog order)."""

    def __init__(self, catalog: Catalog, *, cache_dir: str | Path | None = None) -> None:
        self.catalog = catalog
        self._asins = [product.asin for product in catalog]
        schema = _schema()
        self._index = _open_or_build(catalog, schema, cache_dir)
        self._index.reload()
        self._searcher = self._index.searcher()
        self._positions = self._catalog_positions()

    def search(self, keywords: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """The ASINs of the ``k`` best products for ``keywords`` (empty for no words)."""
        terms = query_terms(keywords)
        if not terms or k <= 0:
            return []
        query = self._index.parse_query(" ".join(terms), ["text"])
        hits = self._searcher.search(query, k).hits
        ranked = sorted(
            (-score, self._positions[address.segment_ord][address.doc]) for score, address in hits
        )
        return [self._asins[position] for _, position in ranked]

    def _catalog_positions(self) -> dict[int, dict[int, int]]:
        """Segment -> tantivy doc id -> catalog position, read once from the stored field.

        Reading the stored field per hit would cost a third of every search.
        """
        positions: dict[int, dict[int, int]] = {}
        everything = self._searcher.search(tantivy.Query.all_query(), len(self._asins)).hits
        for _, address in everything:
            position = int(self._searcher.doc(address)["position"][0])
            positions.setdefault(address.segment_ord, {})[address.doc] = position
        return positions


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", stored=False, tokenizer_name="en_stem")
    builder.add_integer_field("position", stored=True)
    return builder.build()


def _fill(index: tantivy.Index, catalog: Catalog) -> None:
    writer = index.writer(heap_size=_WRITER_HEAP_BYTES, num_threads=1)
    for position, product in enumerate(catalog):
        writer.add_document(tantivy.Document(text=product.search_text(), position=position))
    writer.commit()
    writer.wait_merging_threads()


_LOCK = threading.Lock()
_IN_MEMORY: dict[str, tantivy.Index] = {}


def _open_or_build(
    catalog: Catalog, schema: tantivy.Schema, cache_dir: str | Path | None
) -> tantivy.Index:
    """The catalog's index: from this process's cache, the disk cache, or built now."""
    key = catalog.fingerprint
    with _LOCK:
        if key in _IN_MEMORY:
            return _IN_MEMORY[key]
        if cache_dir is None:
            index = tantivy.Index(schema)
            _fill(index, catalog)
        else:
            index = _disk_index(catalog, schema, Path(cache_dir) / f"webshop-{key}")
        _IN_MEMORY[key] = index
        return index


def clear_memory_cache() -> None:
    """Forget the indexes this process holds (engines already made keep theirs)."""
    with _LOCK:
        _IN_MEMORY.clear()


def _disk_index(catalog: Catalog, schema: tantivy.Schema, folder: Path) -> tantivy.Index:
    done = folder / "COMPLETE"
    if done.exists():
        return tantivy.Index.open(str(folder))
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    index = tantivy.Index(schema, path=str(folder))
    _fill(index, catalog)
    done.write_text(catalog.name + "\n")
    return index
