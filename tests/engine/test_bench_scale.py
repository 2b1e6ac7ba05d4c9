"""The scale benchmark's small case, end to end against the engine (CI runs only this size)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from esbridge.engine.client import Engine

ROOT = Path(__file__).resolve().parents[2]


def test_scale_benchmark_small_case(engine: Engine, sample_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / sample_dir.name).symlink_to(sample_dir, target_is_directory=True)
    out = tmp_path / "scale"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), "--data", str(data), "--sizes", "200,400",
         "--store-max-docs", "200", "--distribution", engine.distribution, "--url", engine.options.url,
         "--queries", "12", "--window", "50", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["window"] == 50
    row, larger = report["rows"]
    assert row["docs"] == 200 and larger["docs"] == 400
    # above --store-max-docs no feature store is built, and its column is left out
    assert larger["feature_store"] is None and "store" not in larger["latency"]
    # both indices hold every document, and the feature store every one of them
    assert row["feature_store"]["documents"] == 200
    assert row["bytes"]["plain"] > 0 and row["bytes"]["esbridge"] > row["bytes"]["plain"]
    assert row["bytes"]["feature_store"] > 0
    lat = row["latency"]
    # esbridge's local OpenSearch and Elasticsearch 8 nodes run its plugin; 7.10 has none
    plugin = engine.distribution == "opensearch" or engine.info.version[0] >= 8
    # with the plugin, its request alone is timed too: the engine's share of a rerank through it
    modes = {"engine", "engine_base", "cold", "warm"} | ({"plugin", "engine_features"} if plugin else set())
    # where the plugin runs, the esbridge index keeps exact lengths in norms instead of term vectors
    assert row["term_vectors"] is larger["term_vectors"] is (not plugin)
    assert set(lat) == modes | {"store"} and set(larger["latency"]) == modes
    # each mode served its candidates from where its column says: cold from the engine, the feature
    # store from disk, warm from memory
    served = row["candidates_served"]
    assert served["cold"]["engine"] > 0 and served["cold"]["memory"] == served["cold"]["disk"] == 0, served
    assert served["store"]["disk"] > 0 and served["store"]["engine"] == 0 == served["store"]["memory"], served
    assert served["warm"]["memory"] > 0 and served["warm"]["engine"] == 0 == served["warm"]["disk"], served
    if plugin:  # nothing kept in memory or on disk: every candidate read inside the engine
        assert served["plugin"]["engine"] > 0 and served["plugin"]["memory"] == served["plugin"]["disk"] == 0
    assert lat["warm"]["p50"] < lat["cold"]["p50"]
    assert all(0 < v["p50"] <= v["p95"] for v in lat.values())
    md = out.with_suffix(".md").read_text()
    assert "| 200 |" in md and "| 400 |" in md and "feature store" in md and "engine, base" in md
    assert ("| 200 | none (norms) |" if plugin else "| 200 | stored |") in md
    assert "engine, base + features" in md
    # the cluster keeps no benchmark index behind
    left = engine.request("GET", "/_cat/indices/bench-scale-*?format=json")
    assert left == [], left
