"""One tie rule: equal scores keep the candidates' (first-stage) order, wherever a ranking is made."""

from __future__ import annotations

import numpy as np
import pytest

from esbridge.errors import ConfigurationError
from esbridge.evaluation.metrics import FastJudge
from esbridge.hybrid.fusion import Fusion, RankedList, fuse
from esbridge.rerank import Ranking, rank_order
from esbridge.rerank.candidates import candidate_keys, reorder_hits
from esbridge.scoring import ScoreResult

#: first-stage order; the ids run against it so an id tie-break would reorder the ties
IDS = ["d9", "d3", "d7", "d1", "d5"]
SCORES = np.array([1.0, 2.0, 1.0, 2.0, 1.0])
WANT = ["d3", "d1", "d9", "d7", "d5"]


def test_rank_order_keeps_the_candidates_order_on_ties() -> None:
    assert [IDS[i] for i in rank_order(SCORES)] == WANT
    assert rank_order([]).tolist() == []


def test_every_ranking_follows_the_one_rule() -> None:
    hits = [{"_id": d, "_score": 10.0 - i} for i, d in enumerate(IDS)]
    ranking = Ranking.of(IDS, ScoreResult(SCORES))
    assert ranking.ids == WANT and ranking.scores.tolist() == [2.0, 2.0, 1.0, 1.0, 1.0]
    assert [h["_id"] for h in reorder_hits(hits, ranking)] == WANT  # search and rescore
    assert [IDS[i] for i in FastJudge.build(IDS, {"d7": 1}).ranking(SCORES)] == WANT  # tune
    for method in Fusion:  # the hybrid pipeline's fusion of one list
        ids, _, _ = fuse({"lexical": RankedList(IDS, SCORES)}, {"lexical": 1.0}, method)
        assert ids == WANT, method


def test_a_ranking_leaves_out_what_the_engine_no_longer_holds() -> None:
    ranking = Ranking.of(IDS, SCORES, [True, False, True, True, True])
    assert ranking.ids == ["d1", "d9", "d7", "d5"] and ranking.dropped == ["d3"]
    assert ranking.order.tolist() == [3, 0, 2, 4] and ranking.result.scores.tolist() == SCORES.tolist()


def test_candidates_are_hits_or_ids() -> None:
    ids, versions = candidate_keys(["a", {"_id": 7, "_seq_no": 3, "_primary_term": 1}, {"_id": "c"}])
    assert ids == ["a", "7", "c"] and versions[0] is None and versions[1] == (3, 1, None) and versions[2] is None
    with pytest.raises(ConfigurationError, match="candidate 1 is neither a hit with an _id nor a document id"):
        candidate_keys(["a", {"_score": 1.0}])
