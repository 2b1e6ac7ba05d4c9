"""TopicRank keyphrases of a text (Bougouin, Boudin and Daille, "TopicRank: Graph-Based Topic
Ranking for Keyphrase Extraction", IJCNLP 2013), for the keyword strategy's narratives.

1. **Candidates.**  The paper takes the longest runs of nouns and adjectives; without a
   part-of-speech tagger a candidate here is a maximal run of words between punctuation marks
   and stopwords.  This module splits the text into words and punctuation marks, and knows a
   list of English function words (:data:`STOPWORDS`), only to find those boundaries and
   to count word offsets; the words of a candidate are never used as terms.  Each distinct
   candidate text is stemmed by a ``stem`` function the caller gives — in the pipeline the
   engine's own analyzer of the index's ``base`` channel (:func:`engine_stems`), so the stems
   are the index's terms.  Occurrences with the same stems are one candidate, at the word
   offsets of their first words; a run the analyzer reduces to nothing is dropped.
2. **Topics.**  Candidates are clustered by hierarchical agglomerative clustering with average
   linkage over the overlap of their stem sets, ``|A ∩ B| / |A ∪ B|``: the two clusters of
   highest mean pairwise overlap are merged while that mean is at least ``threshold = 0.25``
   (the paper's "at least 25% overlapping words").  Ties go to the pair of clusters that occur
   first.
3. **Graph.**  A complete graph of the topics, the edge between topics *i* and *j* weighing
   ``w(i, j) = Σ_{c ∈ t_i} Σ_{c' ∈ t_j} Σ_{p ∈ pos(c)} Σ_{p' ∈ pos(c')} 1 / |p − p'|``
   (reciprocal distances between the candidates' word offsets).
4. **Ranking.**  Weighted PageRank with damping ``λ = 0.85``:
   ``S(t_i) = (1 − λ) + λ · Σ_{j ≠ i} w(j, i) / Σ_{k ≠ j} w(j, k) · S(t_j)``, solved exactly as
   the linear system ``(I − λ P) S = (1 − λ) 1``.
5. **Keyphrases.**  For each topic, best first, its candidate that occurs first in the text (in
   the form of that first occurrence).  Equal scores keep the topics' order of first occurrence.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from esbridge.errors import ConfigurationError

if TYPE_CHECKING:
    from esbridge.engine.client import Engine
    from esbridge.index import IndexLayout

__all__ = ["STOPWORDS", "Candidate", "Keyphrase", "candidate_spans", "candidates", "cluster_topics",
           "topic_graph", "rank_topics", "topicrank", "engine_stems"]

#: English function words that end a candidate phrase (boundaries only, never query terms).
STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below
between both but by can cannot could did do does doing down during each either else ever every few for
from further had has have having he her here hers herself him himself his how however i if in into is it
its itself just may me might more most must my myself neither no nor not of off on once only or other
ought our ours ourselves out over own same shall she should so some such than that the their theirs them
themselves then there these they this those through thus to too under until up upon us very was we were
what when where whether which while who whom whose why will with within without would yet you your yours
yourself yourselves
""".split())

# a word (letters or digits, possibly joined by apostrophes, hyphens or underscores) or one punctuation mark
_TOKEN = re.compile(r"[^\W_](?:[\w'’-]*[^\W_])?|[^\w\s]")


@dataclass(frozen=True)
class Candidate:
    """One candidate: the form of its first occurrence, its stems, the word offsets of its occurrences."""

    text: str
    stems: tuple[str, ...]
    positions: tuple[int, ...]


@dataclass(frozen=True)
class Keyphrase:
    """A topic's keyphrase, its topic's TopicRank score and the topic's candidates."""

    text: str
    score: float
    topic: tuple[str, ...]


def candidate_spans(text: str, stopwords: frozenset[str] = STOPWORDS) -> list[tuple[str, int]]:
    """The maximal runs of non-stopwords between punctuation marks and stopwords, as
    ``(text, word offset of the first word)`` in order of occurrence (see the module text)."""
    spans: list[tuple[str, int]] = []
    run: list[str] = []
    start = offset = 0

    def close() -> None:
        if run:
            spans.append((" ".join(run), start))
            run.clear()

    for m in _TOKEN.finditer(text):
        tok = m.group()
        if not (tok[0].isalnum()):
            close()
            continue
        if tok.lower() in stopwords:
            close()
        else:
            if not run:
                start = offset
            run.append(tok)
        offset += 1
    close()
    return spans


def candidates(spans: Sequence[tuple[str, int]],
               stem: Callable[[Sequence[str]], Sequence[Sequence[str]]]) -> list[Candidate]:
    """The spans grouped by their stems (``stem`` maps distinct texts to their stems), in order of
    first occurrence; spans without stems are dropped."""
    distinct = list(dict.fromkeys(s.lower() for s, _ in spans))
    stemmed = stem(distinct)
    if len(stemmed) != len(distinct):
        raise ConfigurationError(f"the stemmer returned {len(stemmed)} results for {len(distinct)} texts")
    of = {s: tuple(t) for s, t in zip(distinct, stemmed)}
    first: dict[tuple[str, ...], str] = {}
    positions: dict[tuple[str, ...], list[int]] = {}
    for s, pos in spans:
        key = of[s.lower()]
        if not key:
            continue
        first.setdefault(key, s)
        positions.setdefault(key, []).append(pos)
    return [Candidate(first[k], k, tuple(positions[k])) for k in first]


def _overlap(a: tuple[str, ...], b: tuple[str, ...]) -> float:
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb)


def cluster_topics(cands: Sequence[Candidate], threshold: float = 0.25) -> list[list[int]]:
    """Average-linkage agglomerative clustering of ``cands`` (indices) by stem-set overlap,
    merging while the best mean overlap is ``>= threshold``; clusters and their members in order
    of first occurrence."""
    n = len(cands)
    sim = np.array([[_overlap(a.stems, b.stems) for b in cands] for a in cands], dtype=np.float64).reshape(n, n)
    clusters: list[list[int]] = [[i] for i in range(n)]
    # total pairwise overlap between clusters; the mean is total / (|A| · |B|)
    total = sim.copy()
    while len(clusters) > 1:
        sizes = np.array([len(c) for c in clusters], dtype=np.float64)
        mean = total / np.outer(sizes, sizes)
        np.fill_diagonal(mean, -np.inf)
        i, j = divmod(int(np.argmax(mean)), len(clusters))  # the first (row-major) of equal means
        if mean[i, j] < threshold - 1e-12:
            break
        i, j = min(i, j), max(i, j)
        clusters[i] = sorted(clusters[i] + clusters[j])
        del clusters[j]
        total[i, :] += total[j, :]
        total[:, i] += total[:, j]
        total = np.delete(np.delete(total, j, axis=0), j, axis=1)
    return sorted(clusters, key=lambda c: min(min(cands[k].positions) for k in c))


def topic_graph(cands: Sequence[Candidate], topics: Sequence[Sequence[int]]) -> np.ndarray:
    """The topics' complete graph: ``w(i, j)``, the sum of reciprocal offset distances between the
    occurrences of their candidates (zero diagonal)."""
    pos = [np.concatenate([np.asarray(cands[k].positions, dtype=np.float64) for k in t]) if t else np.zeros(0)
           for t in topics]
    n = len(topics)
    w = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            d = np.abs(pos[i][:, None] - pos[j][None, :])
            w[i, j] = w[j, i] = float((1.0 / d[d > 0]).sum())
    return w


def rank_topics(weights: np.ndarray, damping: float = 0.85) -> np.ndarray:
    """Weighted PageRank scores of the graph ``weights`` (see the module text)."""
    w = np.asarray(weights, dtype=np.float64)
    n = len(w)
    if n == 0:
        return np.zeros(0)
    out = w.sum(axis=1)
    # P[i, j]: the share of j's score that flows to i
    p = np.divide(w.T, out[None, :], out=np.zeros_like(w), where=out[None, :] > 0)
    return np.asarray(np.linalg.solve(np.eye(n) - damping * p, np.full(n, 1.0 - damping)))


def topicrank(text: str, stem: Callable[[Sequence[str]], Sequence[Sequence[str]]], n: int = 10, *,
              threshold: float = 0.25, damping: float = 0.85,
              stopwords: frozenset[str] = STOPWORDS) -> list[Keyphrase]:
    """The ``n`` best keyphrases of ``text``, best first (see the module text)."""
    cands = candidates(candidate_spans(text, stopwords), stem)
    if not cands:
        return []
    topics = cluster_topics(cands, threshold)
    scores = rank_topics(topic_graph(cands, topics), damping)
    order = np.lexsort((np.arange(len(topics)), -scores))[:n]
    out = []
    for t in order:
        members = sorted(topics[t], key=lambda k: min(cands[k].positions))
        out.append(Keyphrase(cands[members[0]].text, float(scores[t]), tuple(cands[k].text for k in members)))
    return out


def engine_stems(engine: Engine, index: str, layout: IndexLayout,
                 channel: str = "base") -> Callable[[Sequence[str]], list[list[str]]]:
    """A ``stem`` function for :func:`topicrank`: each text's tokens as the index analyses
    ``channel`` (the engine's ``_analyze``)."""
    from esbridge.features.termvectors import analyze_text

    def stem(texts: Sequence[str]) -> list[list[str]]:
        return [analyze_text(engine, index, layout, t, channel) for t in texts]

    return stem
