"""AgentBench's knowledge-graph task (``AgentBench-KG-v0``) over an embedded store or a SPARQL endpoint."""

from .env import KGEnv
from .store import GraphStore, OxigraphStore, RdflibStore, SparqlEndpointStore
from .tasks import KGRecord, load_kg_tasks

__all__ = [
    "GraphStore",
    "KGEnv",
    "KGRecord",
    "OxigraphStore",
    "RdflibStore",
    "SparqlEndpointStore",
    "load_kg_tasks",
]
