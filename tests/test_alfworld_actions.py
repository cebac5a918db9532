"""AgentBench's reading of ALFWorld actions: lower-casing, BLEU snapping, its edge cases."""

from __future__ import annotations

import math

import pytest

from agentgym_eppo.environments.alfworld.actions import (
    MAX_ACTION_CHARS,
    normalize_action,
    sentence_bleu,
    snap_action,
)

pytestmark = pytest.mark.alfworld

COMMANDS = ["go to fridge 1", "go to cabinet 1", "take apple 1 from countertop 1", "look"]


def test_identical_sentences_score_one() -> None:
    assert sentence_bleu("go to fridge 1", "go to fridge 1") == pytest.approx(1.0)


def test_missing_four_gram_uses_nltk_smoothing_method_four() -> None:
    # 3 of 3 unigrams, 2/2 bigrams, 1/1 trigram, 0/1 four-grams -> smoothed to
    # 1 / (2**1 * 5 / ln 3); brevity penalty exp(1 - 4/3) (hypothesis 3 words, reference 4).
    four_gram = 1 / (2 * 5 / math.log(3))
    expected = math.exp(1 - 4 / 3) * math.exp(math.log(four_gram) / 4)
    assert sentence_bleu("go to fridge 1", "go to fridge") == pytest.approx(expected)


def test_no_shared_word_scores_zero_and_one_word_match_is_undefined() -> None:
    assert sentence_bleu("go to fridge 1", "jump") == 0.0
    assert sentence_bleu("go to fridge 1", "fridge") is None


def test_action_is_first_line_stripped_and_lower_cased() -> None:
    assert normalize_action("  Go To Fridge 1 \nbecause it is cold") == "go to fridge 1"
    assert normalize_action("") == ""
    assert len(normalize_action("x" * 50_000)) == MAX_ACTION_CHARS


def test_admissible_action_is_kept_and_near_miss_snaps_to_closest_command() -> None:
    assert snap_action("GO TO FRIDGE 1", COMMANDS) == "go to fridge 1"
    assert snap_action("go to the fridge", COMMANDS) == "go to fridge 1"
    assert snap_action("take the apple from countertop", COMMANDS) == (
        "take apple 1 from countertop 1"
    )


def test_unrelated_or_one_word_action_is_passed_on_unchanged() -> None:
    assert snap_action("dance wildly", COMMANDS) == "dance wildly"
    assert snap_action("fridge", COMMANDS) == "fridge"
    assert snap_action("", COMMANDS) == ""
    assert snap_action("café ☕ noir", COMMANDS) == "café ☕ noir"
