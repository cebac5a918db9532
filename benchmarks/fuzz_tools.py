"""Fuzzing every tool of the five environments: strategies, and the long fuzz run.

The strategies build what a model (or a buggy library) might hand to ``step`` for a
given tool: calls whose arguments follow the tool's JSON schema but carry hostile
strings (control characters, lone surrogates, huge, deeply nested), and calls broken
in every way the issue lists (malformed JSON, wrong types, missing and extra keys,
several calls in one message, bytes, non-strings), in every accepted form (dict,
OpenAI ``tool_calls`` entry, assistant message, Hermes ``<tool_call>`` text, bare JSON
in prose or a fenced block). ``tests/test_reliability_fuzz.py`` runs them for a
bounded number of examples; :func:`run_fuzz` (``benchmarks/bench_reliability.py``)
runs many more and counts what escapes.
"""

from __future__ import annotations

import importlib
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgym_eppo.core import FunctionCall, Status, ToolCallError, ToolSpec, parse_function_call

ENV_CLASSES: dict[str, str] = {
    "os": "agentgym_eppo.environments.os.env:OSEnv",
    "db": "agentgym_eppo.environments.db.env:DBEnv",
    "kg": "agentgym_eppo.environments.kg.env:KGEnv",
    "alfworld": "agentgym_eppo.environments.alfworld.env:ALFWorldEnv",
    "webshop": "agentgym_eppo.environments.webshop.env:WebShopEnv",
}
"""Task id -> the environment class, imported only when present (``env_class``)."""

DOCUMENTED_STATUSES = frozenset(status.value for status in Status)


def env_class(task: str) -> type[Any]:
    """The environment class of ``task``; ImportError when that task has not landed."""
    module, name = ENV_CLASSES[task].split(":")
    cls: type[Any] = getattr(importlib.import_module(module), name)
    return cls


# ---------------------------------------------------------------------- strategies

surrogates = st.integers(0xD800, 0xDFFF).map(chr)
control_characters = st.sampled_from(["\x00", "\x07", "\x1b[2J", "\r", "\u202e", "\ufeff"])
hostile_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=80),
    st.lists(st.one_of(st.text(max_size=4), surrogates, control_characters), max_size=12).map(
        "".join
    ),
    st.sampled_from(
        [
            "",
            "   ",
            "#0",
            "#-1",
            "#999999999999",
            "'; DROP TABLE x; --",
            "$(reboot)",
            "`id`",
            "../../../etc/passwd",
            "{}",
            "null",
            "search[",
            "click[buy now]",
        ]
    ),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | hostile_text,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=12,
)


def huge_text(max_size: int) -> st.SearchStrategy[str]:
    return st.integers(10_000, max_size).map(lambda n: "x" * n)


def value_for(schema: Mapping[str, Any], huge: int) -> st.SearchStrategy[Any]:
    """A value of the schema's type, filled with hostile content."""
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        return st.one_of([value_for({**schema, "type": one}, huge) for one in kind])
    if "enum" in schema:
        return st.sampled_from(list(schema["enum"]))
    if kind == "array":
        item = value_for(schema.get("items", {}), huge)
        return st.lists(item, max_size=4)
    if kind == "integer":
        return st.integers()
    if kind == "number":
        return st.integers() | st.floats(allow_nan=True, allow_infinity=True)
    if kind == "boolean":
        return st.booleans()
    if kind == "object":
        return st.dictionaries(st.text(max_size=6), json_values, max_size=3)
    return hostile_text | huge_text(huge)


def arguments_for(spec: ToolSpec, huge: int = 200_000) -> st.SearchStrategy[Any]:
    """Arguments of ``spec``: schema-shaped with hostile values, or broken one way."""
    properties: Mapping[str, Any] = spec.parameters.get("properties", {})
    shaped = st.fixed_dictionaries({key: value_for(s, huge) for key, s in properties.items()})
    broken = st.one_of(
        shaped.flatmap(lambda a: _wrong_type(a)),
        shaped.map(lambda a: dict(list(a.items())[1:])),
        shaped.map(lambda a: {**a, "unexpected": 1}),
        json_values,
        shaped.map(lambda a: json.dumps(a, ensure_ascii=False)),
        shaped.map(lambda a: json.dumps(a)[:-1]),
        st.integers(1, 20_000).map(lambda depth: '{"a":' * depth + "1" + "}" * depth),
    )
    return st.one_of(shaped, broken)


def _wrong_type(arguments: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    if not arguments:
        return st.just({"x": None})
    key = st.sampled_from(sorted(arguments))
    return st.tuples(key, json_values).map(lambda pair: {**arguments, pair[0]: pair[1]})


def names_for(spec: ToolSpec, tools: tuple[ToolSpec, ...]) -> st.SearchStrategy[Any]:
    near_misses = [spec.name.upper(), spec.name + "s", spec.name[:-1], "", " " + spec.name]
    return st.one_of(
        st.just(spec.name),
        st.just(spec.name),
        st.sampled_from([tool.name for tool in tools]),
        st.sampled_from(near_misses),
        json_values,
    )


def actions_for(tools: tuple[ToolSpec, ...], huge: int = 200_000) -> st.SearchStrategy[Any]:
    """Whatever might be handed to ``step`` of an env with ``tools``, in every form."""
    raw_calls = st.sampled_from(tools).flatmap(
        lambda spec: st.fixed_dictionaries(
            {"name": names_for(spec, tools), "arguments": arguments_for(spec, huge)}
        )
    )

    def text(call: dict[str, Any]) -> str:
        try:
            return json.dumps(call, ensure_ascii=False)
        except (TypeError, ValueError):  # NaN is fine for json; surrogates too
            return repr(call)

    as_text = raw_calls.map(text)
    hermes = as_text.map(lambda t: f"<tool_call>\n{t}\n</tool_call>")
    in_prose = st.tuples(hostile_text, as_text).map(lambda p: f"{p[0]}\nI will call:\n{p[1]}")
    fenced = as_text.map(lambda t: f"```json\n{t}\n```")
    several = st.lists(hermes, min_size=2, max_size=3).map("".join)
    truncated = st.tuples(hermes, st.integers(0, 120)).map(lambda p: p[0][: p[1]])
    openai = raw_calls.map(lambda c: {"type": "function", "function": c})
    message = st.lists(openai, max_size=3).map(
        lambda calls: {"role": "assistant", "tool_calls": calls}
    )
    return st.one_of(
        raw_calls,
        hermes,
        as_text,
        in_prose,
        fenced,
        several,
        truncated,
        openai,
        message,
        hostile_text,
        json_values,
        st.binary(max_size=64),
        huge_text(huge),
    )


# ---------------------------------------------------------------------- checks


def check_parse(action: Any, tools: tuple[ToolSpec, ...]) -> str:
    """Parse ``action``: "valid", or the status of the ToolCallError. Anything else raises."""
    try:
        call = parse_function_call(action, tools)
    except ToolCallError as error:
        if error.status not in (Status.AGENT_INVALID_ACTION, Status.AGENT_VALIDATION_FAILED):
            raise AssertionError(f"undocumented status {error.status}") from error
        if not str(error):
            raise AssertionError("a ToolCallError without a message") from error
        return error.status.value
    if not isinstance(call, FunctionCall):
        raise AssertionError(f"parse returned {type(call).__name__}")
    spec = {tool.name: tool for tool in tools}[call.name]
    if spec.validate(dict(call.arguments)) != dict(call.arguments):
        raise AssertionError("a returned call does not validate against its tool")
    return "valid"


def check_step(env: Any, action: Any) -> tuple[str, bool]:
    """One ``step`` (after a reset when no episode runs): its status and whether it ended.

    Raises AssertionError when the outcome breaks the documented contract.
    """
    unwrapped = env.unwrapped
    if unwrapped.status is not Status.RUNNING:
        env.reset()
    observation, reward, terminated, truncated, info = env.step(action)
    status = info["status"]
    if not isinstance(observation, str):
        raise AssertionError(f"observation is {type(observation).__name__}")
    if status not in DOCUMENTED_STATUSES:
        raise AssertionError(f"undocumented status {status!r}")
    ended = bool(terminated or truncated)
    if not ended:
        if status != "running" or reward != 0.0:
            raise AssertionError(f"running step with status {status} and reward {reward}")
    elif status == "completed":
        if not 0.0 <= reward <= 1.0 or not terminated:
            raise AssertionError(f"completed with reward {reward}")
    else:
        if reward != unwrapped.abort_penalty:
            raise AssertionError(f"{status} with reward {reward}, not the abort penalty")
        if truncated != (status == "task_limit_reached"):
            raise AssertionError(f"{status} with truncated={truncated}")
    return status, ended


# ---------------------------------------------------------------------- the long run


def agentbench_style_parse(action: Any, tools: tuple[ToolSpec, ...]) -> None:
    """A naive call reader in AgentBench's function-calling style: the first tool call
    of the message, ``json.loads`` of its arguments, then each required argument read
    by key. Errors are not caught: whatever it raises is what would escape."""
    message = action if isinstance(action, dict) else json.loads(action)
    call = message["tool_calls"][0]["function"] if "tool_calls" in message else message
    arguments = call["arguments"]
    if isinstance(arguments, str):
        arguments = json.loads(arguments)
    spec = {tool.name: tool for tool in tools}[call["name"]]
    for key in spec.parameters.get("required", []):
        arguments[key].strip()


def _run_examples(
    strategy: st.SearchStrategy[Any], examples: int, body: Callable[[Any], None]
) -> None:
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(action=strategy)
    def run(action: Any) -> None:
        body(action)

    run()


def fuzz_parser(task: str, examples: int) -> dict[str, Any]:
    tools = tuple(env_class(task).tools)
    outcomes: Counter[str] = Counter()
    timing = [0.0]

    def body(action: Any) -> None:
        started = time.perf_counter()
        try:
            outcomes[check_parse(action, tools)] += 1
        except Exception:
            outcomes["escaped"] += 1
        timing[0] += time.perf_counter() - started
        try:
            agentbench_style_parse(action, tools)
        except Exception:
            outcomes["peer_escaped"] += 1

    _run_examples(actions_for(tools, huge=2_000_000), examples, body)
    total = sum(outcomes[k] for k in ("valid", "agent_invalid_action", "agent_validation_failed"))
    total += outcomes["escaped"]
    return {
        "inputs": total,
        "valid": outcomes["valid"],
        "invalid_action": outcomes["agent_invalid_action"],
        "validation_failed": outcomes["agent_validation_failed"],
        "escaped": outcomes["escaped"],
        "peer_escaped": outcomes["peer_escaped"],
        "us_per_input": timing[0] / max(total, 1) * 1e6,
    }


def fuzz_env_steps(task: str, examples: int, **env_kwargs: Any) -> dict[str, Any]:
    env = env_class(task)(split="dev", **env_kwargs)
    statuses: Counter[str] = Counter()
    counts = {"steps": 0, "episodes": 0, "escaped": 0}
    slowest = [0.0]
    errors: list[str] = []

    def body(action: Any) -> None:
        counts["steps"] += 1
        env.unwrapped.invalid_action = "feedback" if counts["steps"] % 2 else "abort"
        started = time.perf_counter()
        try:
            status, ended = check_step(env, action)
        except Exception as error:
            counts["escaped"] += 1
            errors.append(f"{type(error).__name__}: {str(error)[:200]}")
            return
        finally:
            slowest[0] = max(slowest[0], time.perf_counter() - started)
        statuses[status] += 1
        counts["episodes"] += ended

    try:
        _run_examples(actions_for(tuple(env.unwrapped.tools), huge=200_000), examples, body)
    finally:
        env.close()
    return {**counts, "statuses": dict(statuses), "slowest_s": slowest[0], "errors": errors[:5]}


PARSER_EXAMPLES = 3_000
STEP_EXAMPLES = {"os": 300, "db": 1_000, "kg": 1_000, "alfworld": 300, "webshop": 1_000}
STEP_KWARGS: dict[str, dict[str, Any]] = {"os": {"command_timeout": 5.0}}


def run_fuzz() -> dict[str, Any]:
    """The long run over every task that has landed; absent ones are named with the reason."""
    parser: dict[str, Any] = {}
    steps: dict[str, Any] = {}
    absent: dict[str, str] = {}
    for task in ENV_CLASSES:
        try:
            env_class(task)
        except ImportError as error:
            absent[task] = f"not importable here: {error}"
            continue
        print(f"fuzz: parser of {task}", flush=True)
        parser[task] = fuzz_parser(task, PARSER_EXAMPLES)
        print(f"fuzz: steps of {task}", flush=True)
        steps[task] = fuzz_env_steps(task, STEP_EXAMPLES[task], **STEP_KWARGS.get(task, {}))
    return {"parser": parser, "step": steps, "absent": absent}
