"""The nouns of a product title, without a language model download.

WebShop's type reward compares the nouns (``NOUN``/``PROPN``) that a spaCy English
pipeline finds in the goal's and the purchased product's titles. At the commit AgentBench
builds (64fa2a5), WebShop's ``goal.py`` loads ``en_core_web_sm``; AgentBench's Docker
build then patches that line to ``en_core_web_lg`` (its ``webshop.patch``), so
AgentBench's scores come from the large pipeline. Both are separate downloads (spaCy
3.3's, which WebShop pins, are not on PyPI), so this module approximates them:
product titles are written in title case, and spaCy tags nearly every capitalised
word of a title as a proper noun; what it leaves out are the closed-class words
(prepositions, determiners, conjunctions, pronouns, auxiliaries, particles), numbers,
punctuation, and lower-case adjectives and verbs. The extractor keeps word tokens
that start with a letter, minus a closed-class list, minus lower-case words with
adjective or verb endings.

How far this is from spaCy is measured, not assumed: ``benchmarks/bench_webshop.py``
runs both on a sample of (goal, purchased product) pairs and records how often the
reward differs (``benchmarks/results/webshop.md``; summary in ``docs/webshop.md``).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Callable
from functools import lru_cache

NounExtractor = Callable[[str], list[str]]
"""Maps a product title to its nouns, lower-cased, in order (repeats kept)."""

_WORD = re.compile(r"[^\W\d_][\w'’]*")

_CLOSED_CLASS_WORDS = """
    a an the this that these those each every all both any some no another either neither
    by for with of in on at to from into onto over under about without within between through
    per up off out around across after before behind below beside besides near inside outside
    upon via than like as against along among toward towards during until till since
    and or but nor so yet if because while although though whether
    i you he she it we they me him her us them my your his its our their mine yours ours theirs
    who whom whose what which whatever whichever myself yourself itself themselves
    is are was were be been being am can will would should could may might must shall
    do does did has have had not n't 's s
    very too also just only more most less much many few
"""
CLOSED_CLASS = frozenset(_CLOSED_CLASS_WORDS.split())
"""Words spaCy never tags NOUN or PROPN (plus a few adverbs and quantifiers)."""

_LOWER_CASE_NON_NOUN_ENDINGS = ("able", "ible", "ful", "less", "ous", "ive", "ish", "ly", "ing")


def heuristic_nouns(title: str) -> list[str]:
    """The nouns of ``title``, lower-cased (the default extractor; see the module docstring)."""
    return list(_heuristic_nouns(title))


@lru_cache(maxsize=65536)
def _heuristic_nouns(title: str) -> tuple[str, ...]:
    nouns: list[str] = []
    for word in _WORD.findall(title):
        lower = word.lower()
        if lower in CLOSED_CLASS:
            continue
        if word == lower and lower.endswith(_LOWER_CASE_NON_NOUN_ENDINGS):
            continue
        nouns.append(lower)
    return tuple(nouns)


def spacy_nouns(model: str = "en_core_web_lg") -> NounExtractor:
    """WebShop's own extractor, for users who have a spaCy English model installed.

    The default is the pipeline AgentBench runs (``en_core_web_lg``); WebShop's own
    code at that commit names ``en_core_web_sm``.

    Raises ``OSError`` (spaCy's) when the model is absent; ``model`` may also be the
    name of an importable package that provides a spaCy pipeline (``load()``).
    """
    import spacy

    try:
        nlp = spacy.load(model)
    except OSError:
        if importlib.util.find_spec(model) is None:
            raise
        nlp = importlib.import_module(model).load()

    @lru_cache(maxsize=65536)
    def nouns(title: str) -> tuple[str, ...]:
        return tuple(
            token.text.lower() for token in nlp(title) if token.pos_ in ("PNOUN", "NOUN", "PROPN")
        )

    return lambda title: list(nouns(title))
