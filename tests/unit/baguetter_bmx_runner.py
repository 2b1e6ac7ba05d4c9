"""Run baguetter's BMX on pre-tokenised input (executed inside the baguetter venv).

Reads JSON from stdin::

    {"corpus": [[token, ...], ...],
     "queries": [[token, ...], ...],
     "weighted": [{"queries": [[...], ...], "weights": [w, ...]}, ...]}

and writes JSON to stdout::

    {"version": "0.1.1",
     "scores": [[score of doc 0, doc 1, ...], ...],        # one row per query
     "normalized": [[...], ...],                           # normalize_scores=True
     "weighted": [[...], ...]}                             # search_weighted

Documents are keyed by their position.  baguetter's own text preprocessing is
switched off (and bypassed: lists of tokens are used as given), so both sides see
the same tokens.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version

import numpy as np
from baguetter.indices import BMXSparseIndex, TextPreprocessorConfig


def _full(result: object, n_docs: int) -> list[float]:
    out = np.zeros(n_docs, dtype=np.float64)
    keys = result.keys  # type: ignore[attr-defined]
    scores = np.asarray(result.scores, dtype=np.float64)  # type: ignore[attr-defined]
    for key, score in zip(keys, scores):
        out[int(key)] = score
    return out.tolist()


def main() -> None:
    request = json.load(sys.stdin)
    corpus = request["corpus"]
    n_docs = len(corpus)
    preprocessing_off = TextPreprocessorConfig(
        tokenizer="whitespace",
        stemmer=None,
        stopwords=set(),
        do_lowercasing=False,
        do_ampersand_normalization=False,
        do_special_chars_normalization=False,
        do_acronyms_normalization=False,
        do_punctuation_removal=False,
    )
    index = BMXSparseIndex(dtype="float64", preprocessor_or_config=preprocessing_off)
    index.add_many([str(i) for i in range(n_docs)], corpus)

    scores = [_full(index.search(q, top_k=n_docs), n_docs) for q in request["queries"]]
    weighted = [
        _full(index.search_weighted(w["queries"], w["weights"], top_k=n_docs), n_docs)
        for w in request.get("weighted", [])
    ]
    index.config.normalize_scores = True
    normalized = [_full(index.search(q, top_k=n_docs), n_docs) for q in request["queries"]]

    json.dump(
        {"version": version("baguetter"), "scores": scores, "normalized": normalized, "weighted": weighted},
        sys.stdout,
    )


if __name__ == "__main__":
    main()
