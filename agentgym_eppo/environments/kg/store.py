"""Where the KG tools' SPARQL runs: an embedded store or a remote endpoint, one interface.

:class:`GraphStore` has one job, ``select(query) -> rows``; the queries themselves come
from :mod:`.queries`, so every store answers the very same text.

* :class:`OxigraphStore` (the default): pyoxigraph in memory over a graph file, the
  fastest of the stores to load and to answer (``benchmarks/results/kg.md``).
* :class:`RdflibStore`: the pure-Python option, same files, same queries.
* :class:`SparqlEndpointStore`: any SPARQL 1.1 endpoint over HTTP (Virtuoso serving
  Freebase as in AgentBench, Oxigraph's server, Fuseki, ...). Every request has a
  timeout; a down, slow or failing endpoint raises
  :class:`~agentgym_eppo.core.TaskFailure`, which ends the episode as ``task_error``.
  A response larger than :data:`MAX_RESPONSE_BYTES` is not read past that size.

``select(query, timeout=...)`` bounds a query's time where the store can: the
embedded stores check the clock between result rows and raise
:class:`QueryTooCostly`; an endpoint's request has its own timeout. Neither embedded
store can interrupt a query before its first row (pyoxigraph and rdflib have no
cancellation), which is why the session keeps every query one join over a bounded set
(:mod:`.variables`).

Embedded graphs are loaded once per process and file and shared read-only by every env.
"""

from __future__ import annotations

import abc
import functools
import gzip
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pyoxigraph
import rdflib

from ...core import TaskFailure

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""The most an endpoint's answer to one query may hold: far above any bounded query's."""

StoreKind = Literal["oxigraph", "rdflib"]
STORE_KINDS: tuple[StoreKind, ...] = ("oxigraph", "rdflib")


@dataclass(frozen=True)
class Term:
    """One value in a result row: an IRI or a literal's lexical form."""

    value: str
    is_iri: bool


Row = tuple[Term | None, ...]


class QueryTooCostly(Exception):
    """A query ran past its time limit (the agent's variables asked too much of it)."""


class GraphStore(abc.ABC):
    """Runs SPARQL SELECT queries; rows hold the projected variables in query order."""

    @abc.abstractmethod
    def select(self, query: str, timeout: float | None = None) -> list[Row]:
        """Run ``query``; raise :class:`QueryTooCostly` past ``timeout`` seconds (where
        the store can tell) and :class:`TaskFailure` if the store cannot answer."""

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """Where the data lives, for logs and ``info``."""


class OxigraphStore(GraphStore):
    """pyoxigraph's in-memory store."""

    def __init__(self, store: pyoxigraph.Store, source: str = "memory") -> None:
        self._store = store
        self._source = source

    @classmethod
    def from_file(cls, path: str | Path) -> OxigraphStore:
        """Load an N-Triples or Turtle file (optionally gzipped) into a new store."""
        data, syntax = _read_graph_file(path)
        store = pyoxigraph.Store()
        fmt = pyoxigraph.RdfFormat.N_TRIPLES if syntax == "nt" else pyoxigraph.RdfFormat.TURTLE
        store.bulk_load(input=data, format=fmt)
        return cls(store, str(path))

    def __len__(self) -> int:
        return len(self._store)

    def select(self, query: str, timeout: float | None = None) -> list[Row]:
        deadline = _Deadline(timeout)
        solutions = self._store.query(query)
        if not isinstance(solutions, pyoxigraph.QuerySolutions):
            raise TypeError("GraphStore.select needs a SELECT query")
        width = len(solutions.variables)
        rows: list[Row] = []
        for solution in solutions:  # evaluated lazily: the clock is read between rows
            deadline.check()
            rows.append(tuple(_oxigraph_term(solution[i]) for i in range(width)))
        deadline.check()
        return rows

    @property
    def description(self) -> str:
        return f"pyoxigraph ({self._source})"


class RdflibStore(GraphStore):
    """rdflib's in-memory graph: slower, pure Python."""

    def __init__(self, graph: rdflib.Graph, source: str = "memory") -> None:
        self._graph = graph
        self._source = source

    @classmethod
    def from_file(cls, path: str | Path) -> RdflibStore:
        data, syntax = _read_graph_file(path)
        graph = rdflib.Graph()
        graph.parse(data=data, format="nt" if syntax == "nt" else "turtle")
        return cls(graph, str(path))

    def __len__(self) -> int:
        return len(self._graph)

    def select(self, query: str, timeout: float | None = None) -> list[Row]:
        deadline = _Deadline(timeout)
        rows: list[Row] = []
        for row in self._graph.query(query):
            deadline.check()
            rows.append(tuple(_rdflib_term(term) for term in row))  # type: ignore[union-attr]
        deadline.check()
        return rows

    @property
    def description(self) -> str:
        return f"rdflib ({self._source})"


class SparqlEndpointStore(GraphStore):
    """A SPARQL 1.1 endpoint over HTTP (protocol: POST form ``query=``, JSON results)."""

    def __init__(self, url: str, *, timeout: float = 30.0) -> None:
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"sparql_endpoint must be an http(s) URL, got {url!r}")
        if timeout <= 0:
            raise ValueError(f"endpoint timeout must be positive, got {timeout}")
        self.url = url
        self.timeout = float(timeout)

    def select(self, query: str, timeout: float | None = None) -> list[Row]:
        # The endpoint's own request timeout (``endpoint_timeout``) bounds it instead:
        # a query the session keeps small that still times out is the server's failure.
        payload = self._post(query, self.timeout)
        try:
            variables = payload["head"]["vars"]
            bindings = payload["results"]["bindings"]
            return [
                tuple(_json_term(binding.get(name)) for name in variables) for binding in bindings
            ]
        except (KeyError, TypeError) as error:
            raise TaskFailure(
                f"SPARQL endpoint {self.url} sent results that are not SPARQL JSON ({error!r})"
            ) from None

    def _post(self, query: str, timeout: float) -> Any:
        request = urllib.request.Request(
            self.url,
            data=urllib.parse.urlencode({"query": query}).encode("utf-8"),
            headers={
                "Accept": "application/sparql-results+json",
                "Content-Type": "application/x-www-form-urlencoded",
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                body = response.read(MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as error:
            detail = error.read(300).decode("utf-8", errors="replace").strip()
            raise TaskFailure(
                f"SPARQL endpoint {self.url} answered HTTP {error.code}: {detail}"
            ) from None
        except TimeoutError:
            raise TaskFailure(
                f"SPARQL endpoint {self.url} did not answer within {timeout:g} s"
            ) from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, TimeoutError):
                raise TaskFailure(
                    f"SPARQL endpoint {self.url} did not answer within {timeout:g} s"
                ) from None
            raise TaskFailure(f"cannot reach SPARQL endpoint {self.url}: {error.reason}") from None
        except OSError as error:
            raise TaskFailure(f"SPARQL endpoint {self.url} failed: {error}") from None
        if len(body) > MAX_RESPONSE_BYTES:
            raise TaskFailure(
                f"SPARQL endpoint {self.url} sent more than {MAX_RESPONSE_BYTES >> 20} MiB "
                "for one query"
            )
        try:
            return json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
            raise TaskFailure(f"SPARQL endpoint {self.url} did not send JSON results") from None

    @property
    def description(self) -> str:
        return f"SPARQL endpoint {self.url}"


class _Deadline:
    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.end = None if timeout is None else time.monotonic() + timeout

    def check(self) -> None:
        if self.end is not None and time.monotonic() > self.end:
            raise QueryTooCostly(f"the query ran past its limit of {self.timeout:g} s")


def embedded_store(path: str | Path, kind: StoreKind = "oxigraph") -> GraphStore:
    """The embedded store over ``path``, loaded once per process and shared (read-only)."""
    if kind not in STORE_KINDS:
        raise ValueError(f"store must be one of {STORE_KINDS}, got {kind!r}")
    return _load_embedded(str(Path(path).resolve()), kind)


@functools.lru_cache(maxsize=4)
def _load_embedded(path: str, kind: StoreKind) -> GraphStore:
    return OxigraphStore.from_file(path) if kind == "oxigraph" else RdflibStore.from_file(path)


def _read_graph_file(path: str | Path) -> tuple[bytes, Literal["nt", "ttl"]]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"graph file not found: {path}")
    name = path.name.removesuffix(".gz")
    if name.endswith(".nt"):
        syntax: Literal["nt", "ttl"] = "nt"
    elif name.endswith(".ttl"):
        syntax = "ttl"
    else:
        raise ValueError(
            f"{path}: graph files must be N-Triples (.nt) or Turtle (.ttl), optionally .gz"
        )
    data = path.read_bytes()
    return (gzip.decompress(data) if path.name.endswith(".gz") else data), syntax


def _oxigraph_term(term: Any) -> Term | None:
    if term is None:
        return None
    return Term(term.value, isinstance(term, pyoxigraph.NamedNode))


def _rdflib_term(term: Any) -> Term | None:
    if term is None:
        return None
    return Term(str(term), isinstance(term, rdflib.URIRef))


def _json_term(binding: Any) -> Term | None:
    if binding is None:
        return None
    return Term(str(binding["value"]), binding.get("type") == "uri")
