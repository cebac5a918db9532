"""``AgentBench-WebShop-v0``: WebShop's simulated shop in-process, as AgentBench runs it.

Tools (AgentBench's function-calling names): ``search_action(keywords)`` is WebShop's
``search[keywords]`` and ``click_action(value)`` its ``click[value]``; the native
strings (alone, or after ``Action:`` as in AgentBench's text prompt) are accepted too.
An invalid click or an empty search changes nothing and says so; ``click[Buy Now]``
ends the episode with WebShop's reward, every term of which is in ``info``. 20 turns.

Observations are AgentBench's: ``The initial observation:`` then the page, at reset;
``Action: ...`` / ``Observation:`` / page after each step; each followed by
``Available Actions:`` and WebShop's ``{'has_search_bar': ..., 'clickables': [...]}``.
The page is WebShop's ``text`` mode (strings joined by ``[SEP]``) or, with
``observation_mode="text_rich"``, its rich text mode. Pages are not truncated
(AgentBench does not cut WebShop's output): ``output_limit`` defaults to 0.

>>> import gymnasium as gym, agentgym_eppo
>>> env = gym.make("AgentBench-WebShop-v0", split="test")
>>> obs, info = env.reset(options={"index": 0})
>>> obs.startswith("The initial observation:\\nWebShop [SEP] Instruction: [SEP]")
True
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentgym_eppo.core import (
    AgentBenchEnv,
    FunctionCall,
    TaskFormatError,
    TaskSet,
    ToolResult,
    string_tool,
)

from .catalog import Catalog, shipped_catalog
from .expert import expert_step
from .nouns import NounExtractor, heuristic_nouns
from .original import OriginalData, load_original
from .pages import OBSERVATION_MODES, ObservationMode, Session, Site
from .reward import get_reward
from .search import SearchEngine
from .tasks import WebShopRecord, load_goal_set, records_from_rows

SYSTEM_PROMPT = """You are web shopping.
I will give you instructions about what to do.
You have to follow the instructions.
Every round I will give you an observation and a list of available actions, you have to respond with calling a tool provided based on the state and instruction.
You can use search tool if search is available.
You can click one of the buttons in clickables.
If the action is not valid, perform nothing.
Keywords in search are up to you, but the value in click must be a value in the list of available actions.
Remember that your keywords in search should be carefully designed.
Your should first think about what to do, then call a tool correspondingly.
You should always use a tool, even if you have questions to confirm. You can use whatever tool is available and do not need permission from the user."""
"""AgentBench's function-calling WebShop prompt, word for word."""

_NATIVE_ACTION = re.compile(r"^(search|click)\[(.*)\]$", re.DOTALL)
_ACTION_LINE = re.compile(r"[Aa]ction: *\n* *((search|click)\[.+?\])")


class WebShopEnv(AgentBenchEnv[WebShopRecord]):
    """WebShop: find and buy the product an instruction describes (see the module docstring).

    ``data_dir``: the original WebShop ``data/`` folder; its products and its human
    (``human_goals=True``) or synthetic goals replace the shipped ones, split as WebShop
    splits them. ``catalog``: another catalog in the shipped format (a
    :class:`~.catalog.Catalog` or the path of its JSON lines), for goals given in
    ``tasks``. ``show_attributes`` adds the item page's Attributes button (off in
    AgentBench). ``noun_extractor`` replaces the download-free noun extractor of the
    type reward (e.g. :func:`~.nouns.spacy_nouns`). ``index_cache_dir`` keeps the
    search index on disk between processes.
    """

    task_id = "webshop"
    tools = (
        string_tool(
            "search_action",
            "Search the shop for products: WebShop's search[keywords].",
            keywords="the keywords to search for",
        ),
        string_tool(
            "click_action",
            "Click a button, a product or an option on the page: WebShop's click[value]. "
            "The value must be one of the clickables listed in the observation.",
            value="the clickable to click, as listed",
        ),
    )
    default_max_turns = 20

    def __init__(
        self,
        tasks: str | Sequence[Any] | None = None,
        split: str = "train",
        *,
        data_dir: str | Path | None = None,
        human_goals: bool = True,
        catalog: Catalog | str | Path | None = None,
        observation_mode: ObservationMode = "text",
        show_attributes: bool = False,
        noun_extractor: NounExtractor | None = None,
        index_cache_dir: str | Path | None = None,
        output_limit: int = 0,
        **kwargs: Any,
    ) -> None:
        if observation_mode not in OBSERVATION_MODES:
            raise ValueError(
                f"observation_mode must be one of {OBSERVATION_MODES}, got {observation_mode!r}"
            )
        super().__init__(tasks, split, output_limit=output_limit, **kwargs)
        self.observation_mode: ObservationMode = observation_mode
        self._original: OriginalData | None = None
        if data_dir is not None:
            self._original = load_original(data_dir, human_goals=human_goals)
            catalog = self._original.catalog
        elif isinstance(catalog, (str, Path)):
            catalog = Catalog.load(catalog)
        elif catalog is None:
            catalog = shipped_catalog()
        self.site = Site(
            catalog,
            SearchEngine(catalog, cache_dir=index_cache_dir),
            show_attributes=show_attributes,
        )
        self.nouns: NounExtractor = noun_extractor or heuristic_nouns
        self._session = Session(instruction="")

    # ------------------------------------------------------------------ task hooks

    def _load_tasks(self, tasks: str | Sequence[Any] | None, split: str) -> TaskSet[WebShopRecord]:
        if tasks is None and self._original is not None:
            return records_from_rows(self._original.split(split), name=f"webshop original {split}")
        return load_goal_set(tasks, split)

    def _begin_episode(self, record: WebShopRecord) -> str:
        if record.goal.asin not in self.site.catalog:
            raise TaskFormatError(
                f"{record.sample_id}: goal product {record.goal.asin} is not in the catalog"
            )
        self._session = Session(instruction=record.instruction)
        return f"The initial observation:\n{self._page()}"

    def _run_tool(self, call: FunctionCall) -> ToolResult:
        argument = str(next(iter(call.arguments.values())))
        if call.name == "search_action":
            action = f"search[{argument}]"
            outcome = self.site.search(self._session, argument)
        else:
            action = f"click[{argument}]"
            outcome = self.site.click(self._session, argument)
        info: dict[str, Any] = {"valid_action": outcome.changed, "page": self._session.page.value}
        if outcome.bought:
            return self._purchase(action)
        notice = "" if outcome.changed else f"Invalid action: {outcome.message} Nothing changed.\n"
        return ToolResult(f"Action: {action}\n\nObservation:\n{notice}{self._page()}", info=info)

    def _purchase(self, action: str) -> ToolResult:
        product = self.site.product(self._session)
        chosen = dict(self._session.options)
        breakdown = get_reward(product, self.record.goal, product.price, chosen, self.nouns)
        self._session.reward_text = str(breakdown.reward)
        info = breakdown.as_info()
        info.update(purchased_asin=product.asin, purchased_options=chosen, page="done")
        observation = f"Action: {action}\n\nObservation:\n{self._render()}"
        return ToolResult(observation, done=True, reward=breakdown.reward, info=info)

    def _end_episode(self) -> None:
        """Nothing to release: a session is plain state."""

    def _parse_text_action(self, text: str) -> FunctionCall | None:
        """WebShop's ``search[...]``/``click[...]``, alone or after ``Action:``; a
        ``<tool_call>`` block, when present, always wins."""
        if "<tool_call>" in text:
            return None
        match = _NATIVE_ACTION.match(text.strip())
        if match is None:
            line = _ACTION_LINE.search(text)
            if line is None:
                return None
            match = _NATIVE_ACTION.match(line.group(1))
            if match is None:
                return None
        kind, argument = match.groups()
        if kind == "search":
            return FunctionCall("search_action", {"keywords": argument})
        return FunctionCall("click_action", {"value": argument})

    @property
    def system_prompt(self) -> str:
        return SYSTEM_PROMPT

    def expert_action(self) -> dict[str, Any]:
        """The expert's next call (``{"name", "arguments"}``); see :mod:`.expert`."""
        tool, argument = expert_step(self.site, self._session, self.record)
        key = "keywords" if tool == "search_action" else "value"
        return {"name": tool, "arguments": {key: argument}}

    # ------------------------------------------------------------------ rendering

    @property
    def session(self) -> Session:
        """The shopper's current page state."""
        return self._session

    def available_actions(self) -> dict[str, object]:
        return self.site.available_actions(self._session)

    def _render(self) -> str:
        return self.site.render(self._session, self.observation_mode)

    def _page(self) -> str:
        return f"{self._render()}\n\nAvailable Actions:\n{self.available_actions()}"
