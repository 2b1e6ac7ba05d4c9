"""The mapping benchmark on a few documents: the engine takes every variant of esbridge's mapping,
and each variant lacks exactly the part its row names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from esbridge.engine.client import Engine

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_mapping  # noqa: E402


def _has(mapping: dict, key: str) -> bool:
    """Whether any text field or sub-field of ``mapping`` carries ``key``."""
    for f in mapping["properties"].values():
        if key in f or any(key in sub for sub in f.get("fields", {}).values()):
            return True
    return False


def test_each_variant_lacks_its_part_and_the_engine_indexes_it(engine: Engine, sample_dir: Path,
                                                                tmp_path: Path) -> None:
    _, mapping = bench_mapping.esbridge_body(engine, term_vectors=True)
    variants = dict(bench_mapping.variants(mapping))
    assert _has(mapping, "term_vector") and not _has(variants["without stored term vectors"], "term_vector")
    combined = mapping["_meta"]["esbridge"]["combined"]
    for channel in ("bigram", "micro", "prefix"):
        assert channel in mapping["properties"][combined]["fields"]
        assert channel not in variants[f"without the {channel} channel"]["properties"][combined]["fields"]
    assert all("length" not in f.get("fields", {})
               for f in variants["without the `length` token counts"]["properties"].values())
    alone = variants["without title and text indexed on their own"]["properties"]
    assert alone["title"]["index"] is False and alone[combined]["fields"] == mapping["properties"][combined]["fields"]

    out = tmp_path / "mapping.md"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_mapping.py"), "--dataset", str(sample_dir),
         "--distribution", engine.distribution, "--url", engine.options.url, "--repeats", "1", "--docs", "120",
         "--out", str(out)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = out.read_text()
    for label in ["plain one-text-field", *variants]:
        assert f"| {label} |" in report, label
    # where the plugin runs, also the mapping esbridge creates there: no term vectors, lengths in norms
    plugin = engine.distribution == "opensearch" or engine.info.version[0] >= 8
    assert (f"| {bench_mapping.NORMS} |" in report) == plugin
    if plugin:
        settings, bare = bench_mapping.esbridge_body(engine, term_vectors=False)
        assert not _has(bare, "term_vector") and _has(bare, "similarity") and "similarity" in settings["index"]
    assert "--docs 120" in report
    assert not engine.index_exists(bench_mapping.NAME)
