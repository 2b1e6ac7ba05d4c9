"""TopicRank keyphrases, worked by hand on small texts (esbridge.hybrid.topicrank)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from esbridge.hybrid.topicrank import (
    Candidate,
    candidate_spans,
    candidates,
    cluster_topics,
    rank_topics,
    topic_graph,
    topicrank,
)


def plural_stems(texts: Sequence[str]) -> list[list[str]]:
    """A stand-in for the engine's analyzer: words, a final "s" removed (the pipeline stems with the index)."""
    return [[w.rstrip("s") for w in t.split()] for t in texts]


TEXT = "Solar panels on the roof. Roof solar panels and water heaters."
# words and their offsets (punctuation is no word; stopwords count):
#   0 Solar  1 panels  2 on  3 the  4 roof  .  5 Roof  6 solar  7 panels  8 and  9 water  10 heaters  .
# stopwords on, the, and and the full stops end the runs:
#   c0 "Solar panels" @0 {solar, panel}      c1 "roof" @4 {roof}
#   c2 "Roof solar panels" @5 {roof, solar, panel}      c3 "water heaters" @9 {water, heater}
# overlaps |A ∩ B| / |A ∪ B|: c0–c2 2/3, c1–c2 1/3, every other pair 0.
# clustering: merge c0, c2 (2/3 >= 0.25); then {c0, c2}–c1 has mean (0 + 1/3)/2 = 1/6 < 0.25 (single linkage
# would have merged at 1/3), and the rest are 0: topics T0 = {c0, c2}, T1 = {c1}, T2 = {c3}.
# graph: w(T0, T1) = 1/|0−4| + 1/|5−4| = 1.25;  w(T0, T2) = 1/9 + 1/|5−9| = 13/36;  w(T1, T2) = 1/|4−9| = 0.2
# out-weights: T0 1.25 + 13/36 = 29/18, T1 1.45, T2 13/36 + 0.2 = 101/180.
# PageRank, λ = 0.85:
#   S0 = 0.15 + 0.85 (1.25/1.45 · S1 + (13/36)/(101/180) · S2) = 0.15 + 0.85 (0.862069 S1 + 0.643564 S2)
#   S1 = 0.15 + 0.85 (1.25/(29/18) · S0 + 0.2/(101/180) · S2) = 0.15 + 0.85 (0.775862 S0 + 0.356436 S2)
#   S2 = 0.15 + 0.85 ((13/36)/(29/18) · S0 + 0.2/1.45 · S1)  = 0.15 + 0.85 (0.224138 S0 + 0.137931 S1)
# solved: S = (1.297964, 1.167833, 0.534203); check S2: 0.15 + 0.85 (0.290923 + 0.161080) = 0.534203, and
# the scores add up to the number of topics (3), as PageRank's (1 − λ) + λ · P S with column-stochastic P does.
# keyphrases: T0's first-occurring candidate "Solar panels" (not "Roof solar panels"), then "roof", "water heaters".


def test_candidate_phrases_are_runs_between_stopwords_and_punctuation() -> None:
    assert candidate_spans(TEXT) == [("Solar panels", 0), ("roof", 4), ("Roof solar panels", 5),
                                     ("water heaters", 9)]
    # a hyphenated word is one word; a comma ends a run like a full stop
    assert candidate_spans("High-speed flow, heated models of aircraft") == [
        ("High-speed flow", 0), ("heated models", 2), ("aircraft", 5)]
    assert candidate_spans("") == [] and candidate_spans("of the, and.") == []


def test_candidates_group_occurrences_by_stems() -> None:
    cands = candidates(candidate_spans("Solar panels. The solar panel."), plural_stems)
    # "Solar panels" and "solar panel" stem alike: one candidate, the first form, both offsets
    assert cands == [Candidate("Solar panels", ("solar", "panel"), (0, 3))]
    # a run the analyzer reduces to nothing is no candidate
    assert candidates([("x", 0), ("roof", 1)], lambda ts: [[] if t == "x" else [t] for t in ts]) == [
        Candidate("roof", ("roof",), (1,))]


def test_worked_example_topics_graph_and_ranking() -> None:
    cands = candidates(candidate_spans(TEXT), plural_stems)
    assert [c.stems for c in cands] == [("solar", "panel"), ("roof",), ("roof", "solar", "panel"),
                                        ("water", "heater")]
    topics = cluster_topics(cands)
    assert topics == [[0, 2], [1], [3]]
    w = topic_graph(cands, topics)
    np.testing.assert_allclose(w, [[0, 1.25, 13 / 36], [1.25, 0, 0.2], [13 / 36, 0.2, 0]])
    s = rank_topics(w)
    np.testing.assert_allclose(s, [1.297964, 1.167833, 0.534203], atol=1e-6)
    assert s.sum() == pytest.approx(3.0)
    got = topicrank(TEXT, plural_stems)
    assert [k.text for k in got] == ["Solar panels", "roof", "water heaters"]
    assert got[0].topic == ("Solar panels", "Roof solar panels")
    assert [k.text for k in topicrank(TEXT, plural_stems, n=2)] == ["Solar panels", "roof"]


def test_average_linkage_merges_at_the_threshold() -> None:
    # {a, b} vs {a, c}: 1/3;  {a, b} vs {b, d, e, f}: 1/5;  {a, c} vs {b, d, e, f}: 0
    cands = [Candidate("ab", ("a", "b"), (0,)), Candidate("ac", ("a", "c"), (2,)),
             Candidate("bdef", ("b", "d", "e", "f"), (4,))]
    # merge ab, ac (1/3); then the mean (1/5 + 0)/2 = 0.1 < 0.25: two topics
    assert cluster_topics(cands) == [[0, 1], [2]]
    # with threshold 0.1 the mean 0.1 is enough: one topic
    assert cluster_topics(cands, threshold=0.1) == [[0, 1, 2]]
    # with threshold 0.5 nothing merges
    assert cluster_topics(cands, threshold=0.5) == [[0], [1], [2]]


def test_graph_weights_sum_over_every_pair_of_occurrences() -> None:
    # x at offsets 0 and 6, y at 3: 1/3 + 1/3
    cands = [Candidate("x", ("x",), (0, 6)), Candidate("y", ("y",), (3,))]
    np.testing.assert_allclose(topic_graph(cands, [[0], [1]]), [[0, 2 / 3], [2 / 3, 0]])


def test_one_topic_and_no_text() -> None:
    # a single topic has no edges: S = 1 − λ
    got = topicrank("Solar panels. Solar panel.", plural_stems)
    assert [(k.text, round(k.score, 6)) for k in got] == [("Solar panels", 0.15)]
    assert topicrank("", plural_stems) == [] and topicrank("of the and", plural_stems) == []
