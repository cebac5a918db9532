"""The WebShop site as a page state machine: what each page shows and what a click does.

WebShop serves HTML pages from Flask and its text environment parses them back into
strings; here the pages are built directly as lists of :class:`Element` (text,
buttons, option radio buttons, product links) and rendered in WebShop's two text modes:

* ``text``: the visible strings joined by ``" [SEP] "`` (what AgentBench shows);
* ``text_rich``: one string a line, buttons as ``[button] X [button_]``, chosen options
  and visited products as ``[clicked button] X [clicked button_]``.

Pages and transitions follow WebShop's ``SimServer.receive``:

==============  =========================================================================
page            clickables (lower-case, as WebShop's ``text_to_clickable``)
==============  =========================================================================
search          ``search`` (the search box takes ``search[...]``)
results         ``back to search``, ``< prev`` (page > 1), ``next >`` (more hits), ASINs
item            ``back to search``, ``< prev``, ``description``, ``features``,
                ``reviews``, ``attributes`` (with ``show_attributes``), ``buy now``,
                then every option value
sub-page        ``back to search``, ``< prev`` (back to the item page, options kept)
done            none: the episode is over
==============  =========================================================================

A search (``search[...]``) works from any page, as in WebShop's text environment.
Results are the top 50 BM25 hits, 10 to a page. ``< prev`` on an item page returns to
its results page and forgets the chosen options; ``back to search`` forgets
everything but the instruction.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from .catalog import Catalog, Product
from .search import SEARCH_RETURN_N, SearchEngine

PRODUCT_WINDOW = 10
"""Products on one results page (WebShop's ``PRODUCT_WINDOW``)."""

BACK_TO_SEARCH = "Back to Search"
PREV_PAGE = "< Prev"
NEXT_PAGE = "Next >"
BUY_NOW = "Buy Now"
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")

ObservationMode = Literal["text", "text_rich"]
OBSERVATION_MODES: tuple[ObservationMode, ...] = ("text", "text_rich")
ElementKind = Literal["text", "button", "option", "product"]


class Page(enum.Enum):
    SEARCH = "search"
    RESULTS = "results"
    ITEM = "item"
    SUB_PAGE = "sub_page"
    DONE = "done"


@dataclass(frozen=True)
class Element:
    """One visible string of a page; ``chosen`` marks a picked option or visited product."""

    text: str
    kind: ElementKind = "text"
    chosen: bool = False


@dataclass(frozen=True)
class Target:
    """What a clickable does: a button, a product link (``asin``) or an option value."""

    kind: Literal["button", "product", "option"]
    name: str
    group: str = ""


@dataclass
class Session:
    """One shopper's state (WebShop's ``user_sessions[session_id]``)."""

    instruction: str
    page: Page = Page.SEARCH
    keywords: str = ""
    results: list[str] = field(default_factory=list)
    page_number: int = 1
    asin: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    visited: set[str] = field(default_factory=set)
    sub_page: str = ""
    reward_text: str = ""

    def back_to_search(self) -> None:
        """Forget everything but the instruction (WebShop's index page resets the session)."""
        self.page = Page.SEARCH
        self.keywords = ""
        self.results = []
        self.page_number = 1
        self.asin = None
        self.options = {}
        self.visited = set()
        self.sub_page = ""


@dataclass(frozen=True)
class ClickResult:
    """The outcome of an action: ``changed=False`` means it was invalid and did nothing."""

    changed: bool
    bought: bool = False
    message: str = ""


class Site:
    """The shop's pages over one catalog and search engine (sessions are the state)."""

    def __init__(
        self, catalog: Catalog, engine: SearchEngine, *, show_attributes: bool = False
    ) -> None:
        self.catalog = catalog
        self.engine = engine
        self.show_attributes = show_attributes

    # ------------------------------------------------------------------ actions

    def search(self, session: Session, keywords: str) -> ClickResult:
        """Run ``search[keywords]``: results page 1 (empty keywords change nothing)."""
        keywords = " ".join(keywords.lower().split())
        if session.page is Page.DONE:
            return ClickResult(False, message="The purchase is done; nothing can change.")
        if not keywords:
            return ClickResult(False, message="Empty search: type some keywords.")
        session.keywords = keywords
        session.results = self.engine.search(keywords, SEARCH_RETURN_N)
        self._show_results(session, 1)
        return ClickResult(True)

    def click(self, session: Session, value: str) -> ClickResult:
        """Run ``click[value]`` (matched lower-cased, like WebShop); invalid clicks change nothing."""
        key = value.strip().lower()
        if key == "search":
            return ClickResult(False, message="To search, use search[...] with your keywords.")
        target = self.clickables(session).get(key)
        if target is None:
            return ClickResult(False, message=f"{value!r} is not a clickable on this page.")
        if target.kind == "product":
            session.asin = target.name
            session.visited.add(target.name)
            session.page = Page.ITEM
        elif target.kind == "option":
            session.options[target.group] = target.name
            session.page = Page.ITEM
        elif target.name == BUY_NOW:
            session.page = Page.DONE
            return ClickResult(True, bought=True)
        elif target.name == BACK_TO_SEARCH:
            session.back_to_search()
        elif target.name == NEXT_PAGE:
            self._show_results(session, session.page_number + 1)
        elif target.name == PREV_PAGE and session.page is Page.RESULTS:
            self._show_results(session, session.page_number - 1)
        elif target.name == PREV_PAGE and session.page is Page.ITEM:
            self._show_results(session, session.page_number)
        elif target.name == PREV_PAGE:
            session.page = Page.ITEM
        else:
            session.sub_page = target.name
            session.page = Page.SUB_PAGE
        return ClickResult(True)

    def _show_results(self, session: Session, page_number: int) -> None:
        session.page = Page.RESULTS
        session.page_number = page_number
        session.asin = None
        session.options = {}

    # ------------------------------------------------------------------ what is shown

    def product(self, session: Session) -> Product:
        if session.asin is None:
            raise RuntimeError("no product is open")
        return self.catalog.get(session.asin)

    def page_products(self, session: Session) -> list[Product]:
        start = (session.page_number - 1) * PRODUCT_WINDOW
        window = session.results[start : start + PRODUCT_WINDOW]
        return [self.catalog.get(asin) for asin in window]

    def clickables(self, session: Session) -> dict[str, Target]:
        """Clickable text (lower-case) -> what it does, in WebShop's order."""
        buttons: list[str] = []
        products: list[str] = []
        options: list[tuple[str, str]] = []
        if session.page is Page.SEARCH:
            buttons = ["Search"]
        elif session.page is Page.RESULTS:
            buttons = [BACK_TO_SEARCH]
            if session.page_number > 1:
                buttons.append(PREV_PAGE)
            if session.page_number * PRODUCT_WINDOW < len(session.results):
                buttons.append(NEXT_PAGE)
            products = [product.asin for product in self.page_products(session)]
        elif session.page is Page.ITEM:
            buttons = [BACK_TO_SEARCH, PREV_PAGE, *self._sub_pages(), BUY_NOW]
            options = [
                (group, value)
                for group, values in self.product(session).options.items()
                for value in values
            ]
        elif session.page is Page.SUB_PAGE:
            buttons = [BACK_TO_SEARCH, PREV_PAGE]
        table = {text.lower(): Target("button", text) for text in buttons}
        table.update({asin.lower(): Target("product", asin) for asin in products})
        table.update({value: Target("option", value, group) for group, value in options})
        return table

    def _sub_pages(self) -> Sequence[str]:
        return SUB_PAGES if self.show_attributes else SUB_PAGES[:3]

    def elements(self, session: Session) -> list[Element]:
        """The page's visible strings in order (the body of both text modes)."""
        header = [Element("Instruction:"), Element(session.instruction)]
        if session.page is Page.SEARCH:
            return [Element("WebShop"), *header, Element("Search", "button")]
        if session.page is Page.DONE:
            return [
                Element("Thank you for shopping with us!"),
                Element("Your score (min 0.0, max 1.0)"),
                Element(session.reward_text),
            ]
        if session.page is Page.RESULTS:
            return header + self._results_elements(session)
        if session.page is Page.ITEM:
            return header + self._item_elements(session)
        return header + self._sub_page_elements(session)

    def _results_elements(self, session: Session) -> list[Element]:
        found = len(session.results)
        elements = [
            Element(BACK_TO_SEARCH, "button"),
            Element(f"Page {session.page_number} (Total results: {found})"),
        ]
        if session.page_number > 1:
            elements.append(Element(PREV_PAGE, "button"))
        if session.page_number * PRODUCT_WINDOW < found:
            elements.append(Element(NEXT_PAGE, "button"))
        for product in self.page_products(session):
            elements += [
                Element(product.asin, "product", product.asin in session.visited),
                Element(product.title),
                Element(product.price_tag),
            ]
        return elements

    def _item_elements(self, session: Session) -> list[Element]:
        product = self.product(session)
        elements = [Element(BACK_TO_SEARCH, "button"), Element(PREV_PAGE, "button")]
        for group, values in product.options.items():
            elements.append(Element(group))
            elements += [
                Element(value, "option", session.options.get(group) == value) for value in values
            ]
        elements += [
            Element(product.title),
            Element(f"Price: {product.price_tag}"),
            Element(f"Rating: {product.rating}"),
        ]
        elements += [Element(name, "button") for name in self._sub_pages()]
        elements.append(Element(BUY_NOW, "button"))
        return elements

    def _sub_page_elements(self, session: Session) -> list[Element]:
        product = self.product(session)
        elements = [Element(BACK_TO_SEARCH, "button"), Element(PREV_PAGE, "button")]
        if session.sub_page == "Description":
            elements.append(Element(product.description or "No Description"))
        elif session.sub_page == "Features":
            texts = list(product.bullet_points) or ["No Features"]
            elements += [Element(text) for text in texts]
        elif session.sub_page == "Reviews":
            for review in product.reviews:
                elements += [
                    Element(f'"{review.title}"'),
                    Element(str(review.score)),
                    Element(review.body),
                ]
            if not product.reviews:
                elements.append(Element("No reviews found"))
        else:
            elements += [Element(attribute) for attribute in product.attributes]
            elements += [
                Element(product.category),
                Element(product.query),
                Element(product.product_category),
            ]
        return [element for element in elements if element.text]

    def render(self, session: Session, mode: ObservationMode = "text") -> str:
        """The page in WebShop's ``text`` or ``text_rich`` observation mode."""
        elements = self.elements(session)
        if mode == "text":
            return " [SEP] ".join(element.text for element in elements)
        if mode != "text_rich":
            raise ValueError(f"observation mode must be one of {OBSERVATION_MODES}, got {mode!r}")
        lines: list[str] = []
        clicked: list[str] = []
        for element in elements:
            if element.kind == "button":
                lines.append(f"[button] {element.text} [button_]")
            elif element.kind == "option" and element.chosen:
                lines.append(f"  [clicked button] {element.text} [clicked button_]")
                clicked.append(f"You have clicked {element.text}.")
            elif element.kind == "option":
                lines.append(f"  [button] {element.text} [button_]")
            elif element.kind == "product":
                state = "clicked button" if element.chosen else "button"
                lines.append(f"\n[{state}] {element.text} [{state}_]")
            else:
                lines.append(element.text)
        return "".join(f"{line}\n" for line in [*reversed(clicked), *lines])

    def available_actions(self, session: Session) -> dict[str, object]:
        """WebShop's ``get_available_actions()``: search bar present, and the clickables."""
        return {
            "has_search_bar": session.page is Page.SEARCH,
            "clickables": list(self.clickables(session)),
        }
