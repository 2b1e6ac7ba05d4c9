"""Inverse document frequency variants shared by the scorers.

Each takes index-wide ``df`` (array) and ``n_docs`` and returns an array of the
same shape.  Terms absent from the index (``df = 0``) get the formula's value at
``df = 0``; callers mask unmatched terms through ``tf = 0``.
"""

from __future__ import annotations

import numpy as np

from esbridge.scoring.arrays import FloatArray


def lucene_idf(df: FloatArray, n_docs: int) -> FloatArray:
    """Lucene's BM25 IDF: ``ln(1 + (N - df + 0.5) / (df + 0.5))``.

    Source: Lucene ``BM25Similarity.idf``; always positive.
    """
    df = np.asarray(df, dtype=np.float64)
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


def surprisal_idf(df: FloatArray, n_docs: int) -> FloatArray:
    """Smoothed surprisal: ``-ln((df + 1) / (N + 2))``.

    Source: architecture A (docs/scoring.md §6.1); positive whenever ``df <= N``.
    """
    df = np.asarray(df, dtype=np.float64)
    return -np.log((df + 1.0) / (n_docs + 2.0))


def pubmed_idf(df: FloatArray, n_docs: int) -> FloatArray:
    """PubMed's BM25F IDF: ``1 + ln(N / (df + 1))`` (docs/scoring.md §3.2).

    Source: Fiorini et al., "Best Match: New relevance search for PubMed", PLoS Biology
    16(8), 2018, S1 Text, eq. 2.  With ``N = 0`` (empty index) the value is taken as 1 (``ln`` of 0 is undefined).
    """
    df = np.asarray(df, dtype=np.float64)
    if n_docs <= 0:
        return np.ones_like(df)
    return 1.0 + np.log(n_docs / (df + 1.0))


def robertson_idf(df: FloatArray, n_docs: int) -> FloatArray:
    """Robertson-Sparck Jones IDF: ``ln((N - df + 0.5) / (df + 0.5))``.

    Source: Robertson et al. (1994), as listed in Kamphuis et al. (ECIR 2020);
    negative for terms in more than half of the documents.
    """
    df = np.asarray(df, dtype=np.float64)
    return np.log((n_docs - df + 0.5) / (df + 0.5))
