"""A toy-collection builder shared by the hand-worked scorer tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from esbridge.scoring import ChannelArrays


def channel_arrays(
    tf: Sequence[Sequence[float]],
    df: Sequence[float],
    qtf: Sequence[float],
    doc_len: Sequence[float],
    *,
    n_docs: int = 10,
    avgdl: float = 12.0,
    unique_terms: Sequence[float] | None = None,
    mean_idf: float | None = None,
) -> ChannelArrays:
    """One channel of a toy collection: terms ``t0, t1, ...`` with the given statistics."""
    t = len(df)
    return ChannelArrays(
        terms=tuple(f"t{i}" for i in range(t)),
        qtf=np.asarray(qtf, dtype=np.float64),
        df=np.asarray(df, dtype=np.float64),
        n_docs=n_docs,
        tf=np.asarray(tf, dtype=np.float64).reshape(len(doc_len), t),
        doc_len=np.asarray(doc_len, dtype=np.float64),
        avgdl=avgdl,
        unique_terms=None if unique_terms is None else np.asarray(unique_terms, dtype=np.float64),
        mean_idf=mean_idf,
    )
