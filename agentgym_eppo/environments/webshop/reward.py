"""WebShop's reward for a purchase (``web_agent_site/engine/goal.py: get_reward``).

    reward = r_type * (attributes matched + options matched + [price <= cap])
                    / (goal attributes + goal options + 1)

* ``r_type`` (type reward): 1.0 when the purchased product's title shares more than 20%
  of the goal title's nouns, or the same search query, or two category-path levels;
  0.5 when none of those hold; 0.1 when under 10% of the nouns are shared; 0.0 when none.
* A goal attribute matches when a product attribute has fuzzy token-set ratio > 85 with
  it, or it is a substring of the title, bullet points or description (lower-cased).
* Each chosen option matches when it equals a goal option (``size`` options) or has
  token-set ratio > 85 with one (other options), or is a substring of the product text;
  option values are normalised to their first colour word first, as WebShop does.

Buying without choosing options therefore earns partial credit, as in WebShop. One
departure: the total is capped at 1 (see :func:`get_reward`). The
ratio is thefuzz's: strings lower-cased, non-ASCII and non-alphanumerics removed,
score rounded to an integer. Every term goes to :class:`RewardBreakdown`, which the
environment puts in ``info``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rapidfuzz import fuzz

from .catalog import Product
from .nouns import NounExtractor, heuristic_nouns

EXACT_MATCH_OPTIONS = ("size",)
FUZZY_THRESHOLD = 85

_COLOR_TEXT = (
    "alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze "
    "brown burgundy camel camo caramel champagne charcoal cheetah chestnut chocolate christmas "
    "coffee cognac copper coral cranberry cream crystal dark denim eggplant elephant espresso "
    "fuchsia gold granite grape graphite grass gray green grey heather indigo ivory ivy khaki "
    "lavender lemon leopard light lilac lime magenta maroon mauve merlot midnight mint mocha "
    "multicolor mushroom mustard natural navy nude olive orange peach pewter pink plum purple "
    "rainbow red rose royal rust sand sapphire seashell silver skull slate steel stone stonewash "
    "sunflower tan taupe teal tiger turquoise violet walnut wheat white wine yellow"
)
COLOR_WORDS = tuple(_COLOR_TEXT.split())
"""WebShop's colour list, in its order: an option becomes the first of these it contains."""


@dataclass(frozen=True)
class Goal:
    """What the instruction asks for: WebShop's goal dict, typed."""

    asin: str
    instruction_text: str
    attributes: tuple[str, ...]
    options: tuple[str, ...]
    price_upper: float
    query: str
    category: str
    product_category: str
    name: str


@dataclass(frozen=True)
class RewardBreakdown:
    """Every term of the reward, named as WebShop's verbose ``info`` names them."""

    reward: float
    r_type: float
    query_match: bool
    category_match: bool
    title_score: float
    r_att: float
    w_att: float
    num_attr_matches: int
    r_option: float | None
    w_option: float
    num_option_matches: int
    r_price: bool
    w_price: float
    price: float
    price_upper: float

    def as_info(self) -> dict[str, Any]:
        return asdict(self)


def normalize_color(value: str) -> str:
    """The first WebShop colour word inside ``value``, else ``value`` unchanged."""
    for color in COLOR_WORDS:
        if color in value:
            return color
    return value


def token_set_ratio(a: str, b: str) -> int:
    """thefuzz's ``fuzz.token_set_ratio`` (full processing, ASCII only), on rapidfuzz."""
    a, b = _full_process(a), _full_process(b)
    if not a or not b:
        return 0
    return round(fuzz.token_set_ratio(a, b))


def _full_process(text: str) -> str:
    ascii_text = text.encode("ascii", "ignore").decode()
    cleaned = "".join(ch if ch.isalnum() else " " for ch in ascii_text)
    return cleaned.lower().strip()


def type_reward(
    purchased: Product, goal: Goal, nouns: NounExtractor = heuristic_nouns
) -> tuple[float, bool, bool, float]:
    """``(r_type, query_match, category_match, title_score)`` as WebShop computes them."""
    query_match = purchased.query == goal.query
    purchased_path = {part.strip() for part in purchased.product_category.split("›")}
    goal_path = {part.strip() for part in goal.product_category.split("›")}
    category_match = len(purchased_path & goal_path) >= 2
    desired = nouns(goal.name)
    shared = set(nouns(purchased.title)) & set(desired)
    # WebShop divides the distinct shared nouns by all desired nouns, repeats included.
    title_score = 0.2 if not desired else len(shared) / len(desired)
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def _product_text(purchased: Product) -> tuple[str, str, str]:
    return (
        purchased.title.lower(),
        " ".join(purchased.bullet_points).lower(),
        purchased.description.lower(),
    )


def attribute_matches(purchased: Product, goal_attributes: Sequence[str]) -> int:
    title, bullets, description = _product_text(purchased)
    matches = 0
    for wanted in goal_attributes:
        fuzzy = any(
            token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in purchased.attributes
        )
        if fuzzy or wanted in title or wanted in bullets or wanted in description:
            matches += 1
    return matches


def option_matches(
    purchased: Product, goal_options: Sequence[str], chosen: Mapping[str, str]
) -> int:
    title, bullets, description = _product_text(purchased)
    goals = [normalize_color(option) for option in goal_options]
    matches = 0
    for name, raw_value in chosen.items():
        value = normalize_color(raw_value)
        if name.lower() in EXACT_MATCH_OPTIONS:
            matched = value in goals
        else:
            matched = any(token_set_ratio(wanted, value) > FUZZY_THRESHOLD for wanted in goals)
        if matched or value in title or value in bullets or value in description:
            matches += 1
    return matches


def get_reward(
    purchased: Product,
    goal: Goal,
    price: float,
    chosen_options: Mapping[str, str],
    nouns: NounExtractor = heuristic_nouns,
) -> RewardBreakdown:
    """WebShop's reward for buying ``purchased`` at ``price`` with ``chosen_options``."""
    r_type, query_match, category_match, title_score = type_reward(purchased, goal, nouns)
    n_attributes, n_options = len(goal.attributes), len(goal.options)
    denominator = n_attributes + n_options + 1
    num_attr = attribute_matches(purchased, goal.attributes)
    num_option = option_matches(purchased, goal.options, chosen_options)
    r_price = price <= goal.price_upper
    # WebShop counts every chosen option that matches, so a product with more option
    # groups than the goal names could score above 1; the cap keeps rewards in [0, 1].
    reward = min(1.0, r_type * (num_attr + num_option + int(r_price)) / denominator)
    return RewardBreakdown(
        reward=reward,
        r_type=r_type,
        query_match=query_match,
        category_match=category_match,
        title_score=title_score,
        r_att=num_attr / n_attributes if n_attributes else 0.0,
        w_att=n_attributes / denominator,
        num_attr_matches=num_attr,
        r_option=num_option / n_options if n_options else None,
        w_option=n_options / denominator,
        num_option_matches=num_option,
        r_price=r_price,
        w_price=1 / denominator,
        price=price,
        price_upper=goal.price_upper,
    )
