"""The expert shopper: search the goal's keywords, open the goal product, pick its options, buy.

It reads only the page state and the goal, so it can take over an episode at any
point: from a wrong item page it goes back, from a sub-page it returns to the item, on
results it pages forward until the goal product shows, and if the search missed it
searches the product's title instead.
"""

from __future__ import annotations

from .pages import BUY_NOW, NEXT_PAGE, PREV_PAGE, Page, Session, Site
from .tasks import WebShopRecord


def expert_step(site: Site, session: Session, record: WebShopRecord) -> tuple[str, str]:
    """The next action as ``(tool, argument)``: ``("search_action", keywords)`` or a click."""
    goal = record.goal
    if session.page is Page.SEARCH:
        return "search_action", record.search_query
    if session.page is Page.SUB_PAGE:
        return "click_action", PREV_PAGE
    clickables = site.clickables(session)
    if session.page is Page.RESULTS:
        if goal.asin.lower() in clickables:
            return "click_action", goal.asin
        if NEXT_PAGE.lower() in clickables:
            return "click_action", NEXT_PAGE
        return "search_action", goal.name.lower()
    if session.page is Page.ITEM:
        if session.asin != goal.asin:
            return "click_action", PREV_PAGE
        chosen = set(session.options.values())
        for value in goal.options:
            target = clickables.get(value)
            if target is not None and target.kind == "option" and value not in chosen:
                return "click_action", value
        return "click_action", BUY_NOW
    raise RuntimeError("the purchase is done: the expert has no next action")
