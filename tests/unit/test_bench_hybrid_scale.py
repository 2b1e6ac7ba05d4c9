"""``benchmarks/bench_hybrid_scale.py``'s synthetic vectors: the real model's windows, random unit vectors,
a cache of their own, queries by the real model (nothing of an engine here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from esbridge.semantic.cache import EmbeddingCache
from esbridge.semantic.models import load_encoder
from tests.scripts import benchmark_script

TEXTS = ["short text", " ".join(f"word{i} of a longer abstract" for i in range(60))]


def test_synthetic_vectors_cut_as_the_model_and_embed_queries_with_it(tmp_path: Path) -> None:
    real = load_encoder("all-minilm-l6-v2-q")
    synthetic = benchmark_script("bench_hybrid_scale").SyntheticVectors(real)
    assert synthetic.windows(TEXTS) == real.windows(TEXTS)
    assert synthetic.name == real.name and synthetic.dim == real.dim
    assert synthetic.cache_id != real.cache_id
    cache = EmbeddingCache(tmp_path / "c", real.dim)
    vecs, starts = cache.embed_windows(TEXTS, synthetic)
    assert len(vecs) == sum(len(w) for w in real.windows(TEXTS)) and list(starts)[-1] == len(vecs)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert abs(float(vecs[0] @ vecs[1])) < 0.5  # random, not the model's (which would agree on shared words)
    assert np.array_equal(synthetic.encode_queries(["bone density"]), real.encode_queries(["bone density"]))
    longer = synthetic.at_length(32)
    assert longer.windows(TEXTS) == real.at_length(32).windows(TEXTS) and longer.cache_id == synthetic.cache_id


def test_a_variant_is_read_as_pipeline_parameters() -> None:
    import pytest

    from esbridge.errors import ConfigurationError

    bench = benchmark_script("bench_hybrid_scale")
    params, changed = bench.variant_params("semantic_feedback_from=lexical_semantic, semantic_depth=300, "
                                           "fusion=rrf, keyword_depth=100")
    assert params.semantic_feedback_from == "lexical_semantic" and params.semantic_depth == 300
    assert changed == {"semantic_feedback_from": "lexical_semantic", "semantic_depth": 300, "fusion": "rrf",
                       "keyword": {**changed["keyword"], "depth": 100}}
    assert bench.variant_params("semantic_depth=1000")[1] == {}  # the shipped value: nothing changed
    with pytest.raises(ConfigurationError, match="must look like NAME=VALUE"):
        bench.variant_params("semantic_depth")
    with pytest.raises(ConfigurationError, match="semantic_feedback_from must be one of"):
        bench.variant_params("semantic_feedback_from=keyword")


def test_the_report_says_which_building_figures_it_lacks_and_why() -> None:
    bench = benchmark_script("bench_hybrid_scale")
    lat = {name: [10.0, 12.0] for name in ("engine BM25", "engine hybrid 100", "engine hybrid 1000", "esbridge")}
    steps = {"lexical": 1.0}
    built = {"docs": 5000, "passages": 40000, "index_s": 12.0, "vectors_s": 340.0, "settle_s": 1.0, "segments": 3,
             "calibrate_s": 9.0, "mb": 480.0, "rss_mb": 200.0, "peak_rss_mb": 400.0, "latency": lat, "steps": steps,
             "feedback_scope": "index"}
    reused = {**built, "docs": 50000, "index_s": None, "vectors_s": None, "settle_s": None}
    resumed = {**reused, "docs": 500000, "resumed": True}
    meta = {"engine": "E", "machine": "M", "collections": "c", "model": "m", "queries": 1, "command": "x"}
    text = bench.report([built, reused, resumed], meta)
    building = {line.split(" | ")[0]: line for line in text.split("## Building")[1].splitlines()
                if line.startswith("| ") and " | 40000 | " in line}  # each size's row of the building table
    assert "| 12 | 340 | 1 |" in building["| 5000"]
    assert building["| 50000"].count("— (an earlier run's index)") == 3
    assert building["| 500000"].count("— (an interrupted run's index, finished here)") == 3
