"""``AgentBench-KG-v0``: answer questions by probing a knowledge graph with AgentBench's tools.

Tools: ``get_relations(variable)``, ``get_neighbors(variable, relation)``,
``intersection(variable1, variable2)``, ``get_attributes(variable)``,
``argmax(variable, attribute)``, ``argmin(variable, attribute)``, ``count(variable)``
and ``final_answer(variable)`` (plain text ``Final Answer: #k`` works too). Semantics
and observation wording are AgentBench's (see :mod:`.session`); 15 turns.

Reward: 1 if the submitted variable's members equal the gold answer set, else 0;
F1 goes to ``info["score"]``. A reference to a variable that does not exist ends the
episode as ``agent_validation_failed``; a failing store as ``task_error``.

Backends (one query builder, :mod:`.queries`, for both):

>>> import gymnasium as gym, agentgym_eppo
>>> env = gym.make("AgentBench-KG-v0")                    # embedded pyoxigraph, shipped graph
>>> env = gym.make("AgentBench-KG-v0", store="rdflib")    # pure-Python store  # doctest: +SKIP
>>> env = gym.make("AgentBench-KG-v0", tasks="knowledgegraph/dev.json",
...                sparql_endpoint="http://localhost:3001/sparql")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...core import AgentBenchEnv, FunctionCall, TaskSet, ToolResult
from .actions import KG_TOOLS, check_gold_actions, final_answer_in
from .expert import GoldExpert
from .queries import FREEBASE_NS
from .session import MAX_VARIABLE_SIZE, QUERY_TIMEOUT, KGSession
from .store import GraphStore, SparqlEndpointStore, StoreKind, embedded_store
from .tasks import KGRecord, load_kg_tasks, score_answer, shipped_graph_path

SYSTEM_PROMPT = """You are an agent that answers questions using a knowledge base (KB).
Probe the KB with the tools: list the relations of an entity or variable, follow a
relation to its neighbours, intersect two sets of the same type, list the numerical
attributes of a set and take its argmax or argmin, or count a set.
Remember:
- A variable is an entity or a set of entities produced by an earlier tool call. Each
variable has an id counting from 0: #0 is the first variable, #1 the second, and so on.
- Use the tools in a sensible order (e.g. get the relations before asking for neighbours).
- After each new variable, judge whether it answers the question.
- When you have the answer, call final_answer with its variable, or reply
'Final Answer: #id'; for example, if #3 is the answer, reply 'Final Answer: #3'.
- Make one tool call at a time. You have at most {max_turns} rounds, so plan your calls."""


class KGEnv(AgentBenchEnv[KGRecord]):
    """AgentBench's knowledge-graph task as a Gymnasium text environment (see module doc).

    ``sparql_endpoint``: URL of a SPARQL 1.1 endpoint to query instead of the embedded
    store (``endpoint_timeout`` seconds per request). ``graph``: an N-Triples/Turtle file
    (optionally gzipped) for the embedded store; default the shipped graph. ``store``:
    ``"oxigraph"`` (default) or ``"rdflib"``. ``namespace``: the IRI prefix of entity and
    property names (Freebase's, which the shipped graph uses too). ``max_variable_size``:
    the most entities a variable may hold (a larger result is refused with a message);
    ``query_timeout``: seconds one embedded-store query may run (see :mod:`.session`).
    """

    task_id = "kg"
    tools = KG_TOOLS
    default_max_turns = 15

    def __init__(
        self,
        tasks: str | Sequence[Any] | None = None,
        split: str = "train",
        *,
        sparql_endpoint: str | None = None,
        graph: str | Path | None = None,
        store: StoreKind = "oxigraph",
        namespace: str = FREEBASE_NS,
        endpoint_timeout: float = 30.0,
        max_variable_size: int = MAX_VARIABLE_SIZE,
        query_timeout: float = QUERY_TIMEOUT,
        **kwargs: Any,
    ) -> None:
        super().__init__(tasks, split, **kwargs)
        self.max_variable_size = int(max_variable_size)
        self.query_timeout = float(query_timeout)
        if sparql_endpoint is not None and graph is not None:
            raise ValueError("pass either sparql_endpoint= or graph=, not both")
        self.namespace = namespace
        self.store: GraphStore
        if sparql_endpoint is not None:
            self.store = SparqlEndpointStore(sparql_endpoint, timeout=endpoint_timeout)
        else:
            self.store = embedded_store(graph if graph is not None else shipped_graph_path(), store)
        self._ranges: dict[str, str] = {}
        self._session: KGSession | None = None
        self._expert: GoldExpert | None = None

    @property
    def system_prompt(self) -> str:
        return SYSTEM_PROMPT.format(max_turns=self.max_turns)

    @property
    def session(self) -> KGSession:
        """The running episode's tool state (its variables)."""
        if self._session is None:
            raise RuntimeError("no episode is running: call reset() first")
        return self._session

    def _load_tasks(self, tasks: str | Sequence[Any] | None, split: str) -> TaskSet[KGRecord]:
        return load_kg_tasks(tasks, split)

    def _begin_episode(self, record: KGRecord) -> str:
        self._session = KGSession(
            self.store,
            record.entities,
            namespace=self.namespace,
            ranges=self._ranges,
            max_variable_size=self.max_variable_size,
            query_timeout=self.query_timeout,
        )
        self._expert = GoldExpert(
            check_gold_actions(record.actions, record.entities), record.entities
        )
        return record.prompt

    def _parse_text_action(self, text: str) -> FunctionCall | None:
        if "<tool_call>" in text:
            return None
        reference = final_answer_in(text)
        return FunctionCall("final_answer", {"variable": reference}) if reference else None

    def _run_tool(self, call: FunctionCall) -> ToolResult:
        session = self.session
        if call.name == "final_answer":
            answer = session.answer(call.arguments["variable"])
            reward, f1 = score_answer(answer.values, self.record.answers)
            return ToolResult(
                answer.observation,
                done=True,
                reward=reward,
                score=f1,
                info={"answer": list(answer.values)},
            )
        before = len(session.variables)
        observation = session.call(call)
        if self._expert is not None:
            self._expert.observe(call, before, len(session.variables))
        return ToolResult(observation, info={"variables": len(session.variables)})

    def _end_episode(self) -> None:
        self._session = None
        self._expert = None

    def expert_action(self) -> dict[str, Any]:
        """The gold plan's next call (renumbered after any detour), then ``final_answer``."""
        if self._expert is None:
            raise RuntimeError("no episode is running: call reset() first")
        return self._expert.next_call().to_dict()
