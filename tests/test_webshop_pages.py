"""The page state machine on a small hand-made shop: every page and every transition."""

from __future__ import annotations

import pytest

from agentgym_eppo.environments.webshop.catalog import Catalog, Product, Review
from agentgym_eppo.environments.webshop.pages import Page, Session, Site
from agentgym_eppo.environments.webshop.search import SearchEngine


def widget(number: int, **changes: object) -> Product:
    fields: dict[str, object] = {
        "asin": f"B0WIDGET{number:02d}",
        "title": f"Acme Widget Number {number}",
        "category": "electronics",
        "query": "widget",
        "product_category": "Electronics › Gadgets › Widgets",
        "description": f"Widget {number} does widget things.",
        "bullet_points": ("Sturdy widget", "Blue light"),
        "attributes": ("water resistant", "easy install"),
        "options": {"color": ("black", "navy blue"), "size": ("small", "large")},
        "price": 10.0 + number,
        "price_tag": f"${10 + number}.00",
        "rating": "4.0",
        "reviews": (Review("Nice", 4, "Works well."),),
    }
    fields.update(changes)
    return Product(**fields)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def site() -> Site:
    products = [widget(n) for n in range(25)]
    products.append(widget(99, title="Lonely Gadget", description="", bullet_points=(), reviews=()))
    catalog = Catalog(products, name="widgets")
    return Site(catalog, SearchEngine(catalog))


def fresh() -> Session:
    return Session(instruction="i want a widget")


def searched(site: Site) -> Session:
    session = fresh()
    assert site.search(session, "Widget").changed
    return session


def test_search_page_has_only_the_search_button(site: Site) -> None:
    session = fresh()
    assert site.render(session) == "WebShop [SEP] Instruction: [SEP] i want a widget [SEP] Search"
    assert site.available_actions(session) == {"has_search_bar": True, "clickables": ["search"]}
    result = site.click(session, "Search")
    assert not result.changed and result.message == "To search, use search[...] with your keywords."


def test_results_are_paged_ten_at_a_time_with_next_and_prev(site: Site) -> None:
    session = searched(site)
    assert len(session.results) == 25 and session.keywords == "widget"
    assert list(site.clickables(session))[:2] == ["back to search", "next >"]
    assert len(site.page_products(session)) == 10
    assert "Page 1 (Total results: 25) [SEP] Next > [SEP] B0WIDGET" in site.render(session)
    assert site.click(session, "Next >").changed and session.page_number == 2
    assert list(site.clickables(session))[:3] == ["back to search", "< prev", "next >"]
    site.click(session, "next >")
    assert session.page_number == 3 and len(site.page_products(session)) == 5
    assert "next >" not in site.clickables(session)
    assert not site.click(session, "next >").changed
    site.click(session, "< prev")
    assert session.page_number == 2 and session.page is Page.RESULTS


def test_search_returns_at_most_fifty(site: Site) -> None:
    many = [widget(n, asin=f"B0MANY{n:04d}") for n in range(70)]
    catalog = Catalog(many, name="many")
    big = Site(catalog, SearchEngine(catalog))
    session = fresh()
    big.search(session, "widget")
    assert len(session.results) == 50
    assert "Page 1 (Total results: 50)" in big.render(session)


def test_item_page_lists_options_then_product_then_buttons(site: Site) -> None:
    session = searched(site)
    asin = site.page_products(session)[0].asin
    assert site.click(session, asin.lower()).changed
    product = site.catalog.get(asin)
    assert session.page is Page.ITEM and session.visited == {asin}
    assert site.render(session) == (
        "Instruction: [SEP] i want a widget [SEP] Back to Search [SEP] < Prev [SEP] color "
        "[SEP] black [SEP] navy blue [SEP] size [SEP] small [SEP] large [SEP] "
        f"{product.title} [SEP] Price: {product.price_tag} [SEP] Rating: 4.0 [SEP] "
        "Description [SEP] Features [SEP] Reviews [SEP] Buy Now"
    )
    assert list(site.clickables(session)) == [
        "back to search",
        "< prev",
        "description",
        "features",
        "reviews",
        "buy now",
        "black",
        "navy blue",
        "small",
        "large",
    ]


def test_choosing_options_replaces_the_choice_within_a_group(site: Site) -> None:
    session = searched(site)
    site.click(session, site.page_products(session)[0].asin)
    site.click(session, "black")
    site.click(session, "large")
    site.click(session, "navy blue")
    assert session.options == {"color": "navy blue", "size": "large"}


def test_sub_pages_show_their_content_and_prev_returns_with_options(site: Site) -> None:
    session = searched(site)
    product = site.page_products(session)[0]
    site.click(session, product.asin)
    site.click(session, "small")
    header = "Instruction: [SEP] i want a widget [SEP] Back to Search [SEP] < Prev [SEP] "
    site.click(session, "Description")
    assert site.render(session) == header + product.description
    assert list(site.clickables(session)) == ["back to search", "< prev"]
    site.click(session, "< Prev")
    site.click(session, "Features")
    assert site.render(session) == header + "Sturdy widget [SEP] Blue light"
    site.click(session, "< Prev")
    site.click(session, "Reviews")
    assert site.render(session) == header + '"Nice" [SEP] 4 [SEP] Works well.'
    site.click(session, "< prev")
    assert session.page is Page.ITEM and session.options == {"size": "small"}
    assert not site.click(session, "attributes").changed


def test_empty_sub_pages_say_so(site: Site) -> None:
    session = fresh()
    site.search(session, "lonely gadget")
    site.click(session, "B0WIDGET99")
    for button, text in (
        ("description", "No Description"),
        ("features", "No Features"),
        ("reviews", "No reviews found"),
    ):
        site.click(session, button)
        assert site.render(session).endswith(f"< Prev [SEP] {text}")
        site.click(session, "< prev")


def test_prev_from_item_returns_to_its_results_page_and_forgets_options(site: Site) -> None:
    session = searched(site)
    site.click(session, "next >")
    site.click(session, site.page_products(session)[0].asin)
    site.click(session, "small")
    site.click(session, "< prev")
    assert session.page is Page.RESULTS and session.page_number == 2
    assert session.options == {} and session.asin is None


def test_back_to_search_forgets_everything_but_the_instruction(site: Site) -> None:
    session = searched(site)
    site.click(session, site.page_products(session)[0].asin)
    site.click(session, "Back to Search")
    assert session == fresh()


def test_search_works_from_any_page_as_in_webshop(site: Site) -> None:
    session = searched(site)
    site.click(session, site.page_products(session)[0].asin)
    assert site.search(session, "lonely").changed
    assert session.page is Page.RESULTS and session.results[0] == "B0WIDGET99"


def test_buy_now_ends_on_the_done_page(site: Site) -> None:
    session = searched(site)
    site.click(session, site.page_products(session)[0].asin)
    assert site.click(session, "BUY NOW").bought
    session.reward_text = "0.5"
    assert site.render(session) == (
        "Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] 0.5"
    )
    assert site.available_actions(session) == {"has_search_bar": False, "clickables": []}
    assert not site.search(session, "widget").changed


def test_clicks_not_on_the_page_change_nothing(site: Site) -> None:
    session = searched(site)
    before = (session.page, session.page_number, list(session.results))
    for value in ("buy now", "description", "B0WIDGET24", "", "black", "ünïcödé ✓", "x" * 10_000):
        result = site.click(session, value)
        assert not result.changed and "is not a clickable on this page" in result.message
    assert (session.page, session.page_number, list(session.results)) == before


def test_rich_text_marks_visited_products(site: Site) -> None:
    session = searched(site)
    first = site.page_products(session)[0].asin
    site.click(session, first)
    site.click(session, "< prev")
    rich = site.render(session, "text_rich")
    assert f"\n[clicked button] {first} [clicked button_]\n" in rich
    second = site.page_products(session)[1].asin
    assert f"\n[button] {second} [button_]\n" in rich
    with pytest.raises(ValueError, match="observation mode must be one of"):
        site.render(session, "html")  # type: ignore[arg-type]
