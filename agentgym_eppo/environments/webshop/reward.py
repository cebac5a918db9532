"""WebShop's reward for a purchase, as ``web_agent_site/engine/goal.py`` computes it.

Ported from WebShop at commit 64fa2a5c15c7daa698b9ac93f5bb5437b634c9bd (the commit
AgentBench builds), function by function; ``tests/test_webshop_goal_port.py`` runs
WebShop's own ``tests/web-agent-site/engine/test_goal.py`` against this module.

    reward = r_type * (attributes matched + options matched + [price <= cap])
                    / (goal attributes + goal options + 1)

* ``r_type`` (:func:`type_reward`): 1.0 when the purchased product's title shares more
  than 20% of the goal title's nouns, or the same search query, or two category-path
  levels; 0.5 when none of those hold; 0.1 when under 10% of the nouns are shared; 0.0
  when none.
* A goal attribute matches (:func:`attribute_matches`) when a product attribute has
  token-set ratio > 85 with it, or it is a substring of the lower-cased title, bullet
  points or description.
* A goal option matches (:func:`option_matches`) when any chosen option value has
  token-set ratio > 85 with it, both normalised to their first WebShop colour word;
  each goal option counts at most once, and the product's text plays no part. So the
  total never exceeds 1, and buying without choosing options earns partial credit.

The ratio is thefuzz 0.19's ``fuzz.token_set_ratio`` (WebShop pins ``thefuzz==0.19.0``
without its ``python-Levenshtein`` extra, so thefuzz scores with :mod:`difflib`),
reproduced in :func:`token_set_ratio`. Every term goes to :class:`RewardBreakdown`,
which the environment puts in ``info``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from difflib import SequenceMatcher
from typing import Any

from .catalog import Product
from .nouns import NounExtractor, heuristic_nouns

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
    """thefuzz 0.19's ``fuzz.token_set_ratio(a, b)``, step for step.

    Both strings are processed as thefuzz does: characters U+0080-U+00FF dropped (its
    "asciidammit"; other non-ASCII letters stay), every run of non-word characters
    (``\\W``, so ``_`` stays) turned into a space, lower-cased, stripped. Then the
    sorted shared tokens are compared with each side's sorted tokens, and the best of
    the three difflib ratios, rounded to an integer, is the score.
    """
    first, second = _full_process(a), _full_process(b)
    if not first or not second:
        return 0
    tokens_a, tokens_b = set(first.split()), set(second.split())
    shared = " ".join(sorted(tokens_a & tokens_b))
    with_a = f"{shared} {' '.join(sorted(tokens_a - tokens_b))}".strip()
    with_b = f"{shared} {' '.join(sorted(tokens_b - tokens_a))}".strip()
    return max(_ratio(shared, with_a), _ratio(shared, with_b), _ratio(with_a, with_b))


_LATIN1_SUPPLEMENT = dict.fromkeys(range(128, 256))
_NON_WORD = re.compile(r"\W")


def _full_process(text: str) -> str:
    return _NON_WORD.sub(" ", text.translate(_LATIN1_SUPPLEMENT)).lower().strip()


def _ratio(a: str, b: str) -> int:
    """thefuzz 0.19's ``fuzz.ratio``: equal strings 100 (even empty), one empty 0."""
    if a == b:
        return 100
    if not a or not b:
        return 0
    # thefuzz's ``intr`` is int(round()): halves round to even, as here.
    return round(100 * SequenceMatcher(None, a, b).ratio())


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
    """WebShop's ``get_attribute_reward``: how many goal attributes the product has."""
    title, bullets, description = _product_text(purchased)
    matches = 0
    for wanted in goal_attributes:
        fuzzy = any(
            token_set_ratio(have, wanted) > FUZZY_THRESHOLD for have in purchased.attributes
        )
        if fuzzy or wanted in title or wanted in bullets or wanted in description:
            matches += 1
    return matches


def option_matches(goal_options: Sequence[str], chosen_options: Sequence[str]) -> int:
    """WebShop's ``get_option_reward``: how many goal options some chosen option hits.

    Both sides are colour-normalised; a goal option is hit when any chosen value has
    token-set ratio > 85 with it, and counts once however many values hit it.
    """
    chosen = [normalize_color(value) for value in chosen_options]
    return sum(
        any(token_set_ratio(value, wanted) > FUZZY_THRESHOLD for value in chosen)
        for wanted in (normalize_color(option) for option in goal_options)
    )


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
    num_option = option_matches(goal.options, list(chosen_options.values()))
    r_price = price <= goal.price_upper
    reward = r_type * (num_attr + num_option + int(r_price)) / denominator
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
