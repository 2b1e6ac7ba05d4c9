"""How cost grows with the collection: indexing, latency and size at several corpus sizes.

For each size ``N`` a synthetic corpus of ``N`` documents is drawn from the vocabulary and
the length distribution of the test collections in ``DATA`` (every ``corpus.jsonl`` below
it): each document takes the title and text lengths, in words, of a real document chosen at
random, and its words are drawn from the pooled word frequencies of all of them.  Word
order and co-occurrence are not kept, so the figures are about cost, not quality.  The
queries are the collections' own judged queries.

At each size, in the same run and against the same node:

1. indexing throughput of a plain one-text-field mapping and of esbridge's mapping
   (``esbridge.ingest``), and the size on disk of both indices (``_stats/store``);
2. the feature store (``esbridge features build`` of the esbridge index): build time and size
   on disk;
3. per-query latency (p50, p95) at window 100: the engine's BM25 ``match`` on the plain index and
   on the esbridge index's own base channel (the query esbridge's first stage runs), the same
   query asking esbridge's engine plugin for the candidates' features (the request a rerank
   through the plugin sends: where the engine's time goes, apart from the client's), and
   esbridge's rerank: through esbridge's engine plugin (where the node runs it), cold
   (candidates in neither the store nor memory: every term vector fetched from the engine), from
   the feature store (nothing in memory, as in a new process) and warm (every candidate in
   memory).

``--store-max-docs N`` builds the feature store (and times its column) only at sizes up to ``N``:
at 500,000 documents its build alone takes most of an hour.

Usage (one command; starts esbridge's local node when no --url is given):

    python benchmarks/bench_scale.py --data DATA --sizes 5000,50000,500000

``--merge`` keeps the rows of sizes not run from the JSON of an earlier run (so a large size can
be measured on its own and joined to the table).

Results go to ``benchmarks/results/scale-<distribution>.md`` and ``.json``, with a plot
(``.svg``, needs matplotlib: ``pip install "esbridge[eval]"``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from esbridge.engine.client import Engine
from esbridge.engine.plan import run
from esbridge.features.build import build_store
from esbridge.features.cache import TermVectorCache
from esbridge.features.diskstore import DiskVectorStore
from esbridge.features.plugin import analysing_ext, features_plugin_plan
from esbridge.ingest import ingest, read_jsonl
from esbridge.nodes.provision import provision
from esbridge.rerank import Reranker

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import bulk_load, engine_arguments, judged_queries, machine, ms, write_report  # noqa: E402

PLAIN_BODY = {"settings": {"index": {"number_of_shards": 1, "number_of_replicas": 0}},
              "mappings": {"dynamic": False, "properties": {"text": {"type": "text"}}}}


class Vocabulary:
    """Pooled word frequencies and (title, text) lengths of real collections."""

    def __init__(self, corpora: list[Path]) -> None:
        counts: Counter[str] = Counter()
        lengths = []
        for path in corpora:
            for line in open(path, encoding="utf-8"):
                if not line.strip():
                    continue
                doc = json.loads(line)
                title, text = (doc.get("title") or "").split(), (doc.get("text") or "").split()
                counts.update(title)
                counts.update(text)
                lengths.append((len(title), len(text)))
        self.words = np.array(list(counts), dtype=object)
        freq = np.array(list(counts.values()), dtype=np.float64)
        self.cdf = np.cumsum(freq / freq.sum())
        self.lengths = np.array(lengths, dtype=np.int64)

    def write_corpus(self, n: int, dest: Path, seed: int = 0) -> None:
        """``n`` synthetic documents as BEIR-style JSONL (``_id``, ``title``, ``text``)."""
        rng = np.random.default_rng(seed)
        with open(dest, "w", encoding="utf-8") as out:
            for start in range(0, n, 10_000):
                k = min(10_000, n - start)
                pick = self.lengths[rng.integers(0, len(self.lengths), k)]
                total = int(pick.sum())
                picked = np.searchsorted(self.cdf, rng.random(total), side="right")
                words = self.words[picked.clip(0, len(self.words) - 1)]
                at = 0
                for i, (n_title, n_text) in enumerate(pick):
                    title = " ".join(words[at:at + n_title])
                    at += n_title
                    text = " ".join(words[at:at + n_text])
                    at += n_text
                    out.write(json.dumps({"_id": f"s{start + i}", "title": title, "text": text}) + "\n")


def corpora_and_queries(data: Path, count: int) -> tuple[list[Path], Vocabulary, list[str]]:
    """The ``corpus.jsonl`` files of the collections below ``data``, their pooled :class:`Vocabulary`, and
    ``count`` of their judged queries, taken evenly from each."""
    corpora = sorted(data.glob("*/corpus.jsonl"))
    if not corpora:
        raise SystemExit(f"--data {data}: no */corpus.jsonl below it")
    per = max(1, count // len(corpora))
    return corpora, Vocabulary(corpora), [q for c in corpora for q in judged_queries(c.parent, per)][:count]


def store_bytes(engine: Engine, index: str) -> int:
    stats = engine.request("GET", f"/{index}/_stats/store")
    return int(stats["_all"]["primaries"]["store"]["size_in_bytes"])


def index_plain(engine: Engine, name: str, corpus: Path) -> float:
    engine.delete_index(name)
    t0 = time.perf_counter()
    engine.request("PUT", f"/{name}", body=PLAIN_BODY)
    with open(corpus, encoding="utf-8") as f:
        bulk_load(engine, name, (json.loads(line) for line in f if line.strip()),
                  lambda d: {"text": f"{d.get('title') or ''} {d.get('text') or ''}"})
    return time.perf_counter() - t0


def index_esbridge(engine: Engine, name: str, corpus: Path) -> tuple[float, bool]:
    """Seconds to index ``corpus`` with esbridge's mapping, and whether the index stores term vectors."""
    engine.delete_index(name)
    t0 = time.perf_counter()
    report = ingest(engine, name, read_jsonl(corpus), progress=False, strict=True)
    return time.perf_counter() - t0, report.term_vectors


def latency(engine: Engine, index: str, plain: str, queries: list[str], window: int,
            store: DiskVectorStore | None, plugin: bool) -> tuple[dict[str, list[float]], dict[str, dict[str, int]]]:
    """Per-query seconds of each mode, and where each esbridge mode's candidates came from
    (the vector cache's memory hits, disk hits and misses, i.e. engine fetches), so a report shows
    that each mode measured what its column says."""
    # an untimed pass over both indices first, so a freshly started node's compilation and the
    # file cache favour no mode (its reranker's caches are dropped)
    with Reranker(engine, index, scorer="evolved", window=window) as warmup:
        layout = warmup.layout
        assert layout is not None  # an esbridge index
        base = layout.subfield(layout.combined, "base")
        for q in queries:
            engine.search(plain, {"size": window, "query": {"match": {"text": q}}})
            engine.search(index, {"size": window, "query": {"match": {base: q}}})
            warmup.search(q, size=10)
    out: dict[str, list[float]] = {"engine": [], "engine_base": [], "engine_features": [], "plugin": [],
                                   "cold": [], "store": [], "warm": []}
    channels = list(layout.channels)
    plugin_requests: list[tuple[str, str, dict[str, Any]]] = []
    for q in queries:  # the engine's BM25 on the plain index and on esbridge's base channel, the same window
        requests = [("engine", plain, {"size": window, "query": {"match": {"text": q}}}),
                    ("engine_base", index, {"size": window, "query": {"match": {base: q}}})]
        if plugin:  # the first stage's request through the plugin: the query analysed and the features counted
            # (and, as esbridge sends it, the hits identified from the doc values of their ids, no stored field read)
            lean = {"_source": False, "stored_fields": "_none_", "docvalue_fields": [layout.id_values]} \
                if layout.id_values else {}
            requests.append(("engine_features", index, {"size": window, "query": {"match": {base: q}}, **lean,
                                                        "ext": analysing_ext(layout, q, channels, channels)}))
        plugin_requests += requests[1:]
        for key, where, body in requests:
            t0 = time.perf_counter()
            engine.search(where, body)
            out[key].append(time.perf_counter() - t0)
    served = {mode: {"memory": 0, "disk": 0, "engine": 0} for mode in ("plugin", "cold", "store", "warm")}
    if plugin:  # where the engine's time goes: the same requests again, profiled (not timed)
        profiled = {key: engine_parts(engine, where, [b for k, _, b in plugin_requests if k == key], key)
                    for key, where in (("engine_base", index), ("engine_features", index))}

    def timed(r: Reranker, q: str, mode: str) -> None:
        before, carried = r.store.vectors.counts(), r.store.carried
        t0 = time.perf_counter()
        r.search(q, size=10)
        out[mode].append(time.perf_counter() - t0)
        after = r.store.vectors.counts()
        disk = after.disk_hits - before.disk_hits
        served[mode]["disk"] += disk
        served[mode]["memory"] += after.hits - before.hits - disk
        # read from the engine: missed by the caches, or brought by the first stage (the plugin)
        served[mode]["engine"] += after.misses - before.misses + r.store.carried - carried

    if plugin:  # the candidates' features read inside the engine by esbridge's plugin
        rp = Reranker(engine, index, scorer="evolved", window=window, features="plugin")
        for q in queries:
            timed(rp, q, "plugin")
        rp.close()
    # the other modes read term vectors (_mtermvectors), as on a cluster without the plugin
    rr = Reranker(engine, index, scorer="evolved", window=window, features="termvectors")
    for q in queries:  # cold: nothing in memory; warm: the same query again, its candidates now in memory
        rr.store.vectors.clear()
        timed(rr, q, "cold")
        timed(rr, q, "warm")
    rr.close()
    if store is not None:
        rs = Reranker(engine, index, scorer="evolved", window=window, features="termvectors",
                      vector_cache=TermVectorCache(max_entries=window, disk=store))
        for q in queries:  # candidates in the feature store, none in memory
            rs.store.vectors.clear()
            timed(rs, q, "store")
        rs.close()
    else:
        del out["store"], served["store"]
    if not plugin:
        del out["plugin"], served["plugin"], out["engine_features"]
        profiled = {}
    return out, served, profiled


#: The engine's profile of a search, summed per query: the query phase, and the fetch phase's
#: parts (``fetch.<part>``, and ``<sub-phase>.<part>`` for each fetch sub-phase), in ms.
Parts = dict[str, float]


def engine_parts(engine: Engine, index: str, bodies: list[dict[str, Any]], label: str) -> Parts:
    """The mean per query of each part of the engine's own profile (``"profile": true``) of
    ``bodies``, in ms; ``segments`` is the mean number of segments the fetch phase read."""
    total: Counter[str] = Counter()
    for body in bodies:
        got = engine.search(index, {**body, "profile": True})
        for shard in got["profile"]["shards"]:
            for search in shard["searches"]:
                total["query"] += sum(q["time_in_nanos"] for q in search["query"]) / 1e6
                total["collector"] += sum(c["time_in_nanos"] for c in search["collector"]) / 1e6
            fetches = shard.get("fetch", [])  # OpenSearch: a list; Elasticsearch 8: one entry
            for fetch in [fetches] if isinstance(fetches, dict) else fetches:
                total["fetch"] += fetch["time_in_nanos"] / 1e6
                for part, ns in fetch["breakdown"].items():
                    if part.endswith("_count"):
                        if part in ("get_next_reader_count", "next_reader_count"):
                            total["segments"] += ns
                        continue
                    total[f"fetch.{part}"] += ns / 1e6
                for child in fetch.get("children", []):
                    for part, ns in child["breakdown"].items():
                        if not part.endswith("_count"):
                            total[f"{child['type']}.{part}"] += ns / 1e6
    if not total:
        print(f"{label}: the engine gave no profile", file=sys.stderr)
    return {k: v / max(1, len(bodies)) for k, v in sorted(total.items())}


#: The rows of the engine-side table: label, the part in the plugin's request (the first of its names
#: the profile has: OpenSearch's, then Elasticsearch's), and whether to subtract the same part of the
#: engine's own request.  Elasticsearch's profile does not time building the fetch sub-phases.
WHERE_ROWS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("query phase (the `match`)", ("query",), False),
    ("fetch phase, all of it", ("fetch",), False),
    ("fetch: reading stored fields (`_id`, `_source`)", ("fetch.load_stored_fields",), False),
    ("plugin: setting up (the query's analysis, each term's statistics looked up in every segment)",
     ("fetch.build_sub_phase_processors",), True),
    ("plugin: per segment with hits (each term's postings opened)",
     ("FeaturesFetchSubPhase.set_next_reader", "FeaturesFetchSubPhase.next_reader"), False),
    ("plugin: per hit (frequencies from the postings, lengths from the norms, packing)",
     ("FeaturesFetchSubPhase.process",), False),
)


LATENCY_COLUMNS = (
    "Columns: *engine, plain* is the engine's BM25 `match` on the plain index's `text` field (the "
    "standard analyzer, which keeps stopwords); *engine, base* is the engine's BM25 `match` on the "
    "esbridge index's base channel, the query esbridge's first stage sends, and the ratios are to "
    "it; *engine, base + features* is the same query with the extension that has esbridge's engine "
    "plugin analyse the query and count each hit's features, its hits identified from the doc values "
    "of their ids without reading any stored field (the request a rerank through the plugin sends, "
    "without the client's work on its answer and the `_mget` of the top ten's `_source`); *plugin* "
    "is esbridge's rerank with the candidates' features read inside the engine by esbridge's engine "
    "plugin (no client-side store, nothing kept between queries); the other columns read term "
    "vectors with `_mtermvectors`, as on a cluster without the plugin: *cold* is esbridge's rerank "
    "with nothing in memory and no feature store (every candidate's term vectors fetched from the "
    "engine); *feature store* is a new process's view (candidates in the store, none in memory); "
    "*warm* is the same query again right after its cold run (every candidate in memory). The "
    "synthetic documents draw stopwords at their pooled frequency, so on large corpora the plain "
    "index's query (whose stopwords match nearly every document) costs more than the base channel's "
    "query."
)


def plot(rows: list[dict[str, Any]], dest: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    sizes = [r["docs"] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for key, label in (("engine_base", "engine BM25, base channel"), ("plugin", "esbridge evolved, plugin"),
                       ("cold", "esbridge evolved, cold"), ("store", "esbridge evolved, feature store"),
                       ("warm", "esbridge evolved, warm")):
        have = [r for r in rows if key in r["latency"]]
        a.plot([r["docs"] for r in have], [r["latency"][key]["p50"] for r in have], marker="o", label=f"{label} p50")
        a.plot([r["docs"] for r in have], [r["latency"][key]["p95"] for r in have], marker=".", linestyle="--",
               label=f"{label} p95")
    a.set(xscale="log", yscale="log", xlabel="documents", ylabel="ms per query (window 100)")
    a.legend(fontsize=7)
    b.plot(sizes, [r["indexing"]["plain_docs_per_s"] for r in rows], marker="o", label="plain mapping")
    b.plot(sizes, [r["indexing"]["esbridge_docs_per_s"] for r in rows], marker="o", label="esbridge mapping")
    b.set(xscale="log", xlabel="documents", ylabel="documents indexed per second")
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(dest)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="folder holding BEIR-layout collections")
    ap.add_argument("--sizes", default="5000,50000", help="corpus sizes, comma-separated (default 5000,50000)")
    engine_arguments(ap)
    ap.add_argument("--queries", type=int, default=200, help="queries to time at each size (default 200)")
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--out", default=None, help="output stem (default benchmarks/results/scale-<distribution>)")
    ap.add_argument("--merge", action="store_true", help="keep the earlier JSON's rows of sizes not run")
    ap.add_argument("--store-max-docs", type=int, default=None,
                    help="build the feature store only at sizes up to this (default: at every size)")
    args = ap.parse_args()

    corpora, vocab, queries = corpora_and_queries(Path(args.data), args.queries)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    prov = provision(args.distribution, url=args.url, use_docker=False, progress=True)
    engine = Engine.connect(prov.options())
    plugin = run(features_plugin_plan(engine), engine)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            corpus = Path(tmp) / f"synthetic-{n}.jsonl"
            vocab.write_corpus(n, corpus)
            plain, esb = f"bench-scale-plain-{n}", f"bench-scale-{n}"
            t_plain = index_plain(engine, plain, corpus)
            t_esb, term_vectors = index_esbridge(engine, esb, corpus)
            with_store = args.store_max_docs is None or n <= args.store_max_docs
            store = DiskVectorStore(Path(tmp) / "store") if with_store else None
            built = build_store(engine, esb, store, progress=True) if store is not None else None
            lat, served, profiled = latency(engine, esb, plain, queries, args.window, store, plugin)
            if store is not None:
                store.close()
            rows.append({
                "docs": n,
                "term_vectors": term_vectors,
                "indexing": {"plain_s": t_plain, "esbridge_s": t_esb, "plain_docs_per_s": n / t_plain,
                             "esbridge_docs_per_s": n / t_esb},
                "bytes": {"plain": store_bytes(engine, plain), "esbridge": store_bytes(engine, esb),
                          "feature_store": built.size.bytes if built else None},
                "feature_store": {"documents": built.documents, "seconds": built.seconds,
                                  "docs_per_s": built.documents / built.seconds,
                                  "terms": built.size.terms} if built else None,
                "latency": {k: {"p50": ms(v, 50), "p95": ms(v, 95)} for k, v in lat.items()},
                "candidates_served": served,
                "engine_profile": profiled,
            })
            print(json.dumps(rows[-1]), file=sys.stderr)
            engine.delete_index(plain)
            engine.delete_index(esb)
            corpus.unlink()
            shutil.rmtree(Path(tmp) / "store", ignore_errors=True)

    stem = Path(args.out) if args.out else HERE / "results" / f"scale-{args.distribution}"
    stem.parent.mkdir(parents=True, exist_ok=True)
    if args.merge and stem.with_suffix(".json").exists():
        ran = {r["docs"] for r in rows}
        earlier = json.loads(stem.with_suffix(".json").read_text())
        rows = sorted(rows + [r for r in earlier["rows"] if r["docs"] not in ran], key=lambda r: r["docs"])
    stem.with_suffix(".json").write_text(json.dumps({"machine": machine(), "engine": engine.info.label,
                                                     "window": args.window, "rows": rows}, indent=1) + "\n")
    has_plot = plot(rows, stem.with_suffix(".svg"))
    names = ", ".join(c.parent.name for c in corpora)
    out = [f"# Scale: {engine.info.label}", "",
           f"Machine: {machine()}. Engine: {engine.info.label} (local node, same machine).", "",
           f"Corpus: synthetic, drawn from the words and the document lengths of {names} "
           f"({len(vocab.words)} distinct words, {len(vocab.lengths)} documents); {len(queries)} of their judged "
           f"queries; window {args.window}, size 10.", "",
           f"Command: `python benchmarks/bench_scale.py --data <folder of collections> --sizes {args.sizes} "
           f"--distribution {args.distribution}"
           + (f" --store-max-docs {args.store_max_docs}" if args.store_max_docs is not None else "")
           + (" --merge`; the rows of other sizes come from an earlier run" if args.merge and
              any(r["docs"] not in sizes for r in rows) else "`"), "",
           "Indexing and size on disk (the feature store: `esbridge features build` of the esbridge index; "
           "*term vectors*: whether the esbridge index stored them, or, where the engine plugin runs, kept exact "
           "lengths in its similarity's norms instead):", "",
           "| docs | term vectors | plain docs/s | esbridge docs/s | esbridge / plain time | plain MB | esbridge MB | "
           "feature store build docs/s | feature store MB |",
           "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]

    def cell(r: dict[str, Any], key: str, fmt: str) -> str:
        lat = r["latency"].get(key)
        return fmt.format(**lat) if lat else "—"

    def ratio(r: dict[str, Any], key: str) -> str:
        lat, engine_base = r["latency"].get(key), r["latency"].get("engine_base")
        return f"{lat['p50'] / engine_base['p50']:.2f}x" if lat and engine_base else "—"

    for r in rows:
        ix, fs = r["indexing"], r.get("feature_store")
        fs_rate = f"{fs['docs_per_s']:.0f}" if fs else "—"
        fs_mb = f"{r['bytes']['feature_store'] / 1e6:.1f}" if fs else "—"
        out.append(
            f"| {r['docs']} | {'stored' if r.get('term_vectors', True) else 'none (norms)'} | "
            f"{ix['plain_docs_per_s']:.0f} | {ix['esbridge_docs_per_s']:.0f} | "
            f"{ix['esbridge_s'] / ix['plain_s']:.2f}x | {r['bytes']['plain'] / 1e6:.1f} | "
            f"{r['bytes']['esbridge'] / 1e6:.1f} | {fs_rate} | {fs_mb} |")
    out += ["", f"Per-query latency, window {args.window} (p50 / p95 ms; ratios of p50 to the engine's):", "",
            LATENCY_COLUMNS, "",
            "| docs | engine, plain | engine, base | engine, base + features | plugin | cold | feature store | "
            "warm | features / engine | plugin / engine | cold / engine | store / engine | warm / engine |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        f = "{p50:.1f} / {p95:.1f}"
        out.append(f"| {r['docs']} | {cell(r, 'engine', f)} | {cell(r, 'engine_base', f)} | "
                   f"{cell(r, 'engine_features', f)} | {cell(r, 'plugin', f)} | {cell(r, 'cold', f)} | "
                   f"{cell(r, 'store', f)} | {cell(r, 'warm', f)} | {ratio(r, 'engine_features')} | "
                   f"{ratio(r, 'plugin')} | {ratio(r, 'cold')} | "
                   f"{ratio(r, 'store')} | {ratio(r, 'warm')} |")
    profiled_rows = [r for r in rows if r.get("engine_profile")]
    if profiled_rows:
        out += ["", "Where the engine's time goes in the plugin's request (the engine's own profile, "
                "`\"profile\": true`, of the *engine, base + features* requests, run again untimed; mean ms "
                "per query; the profile's own overhead is in these figures, so they add up to more than the "
                "timed columns). *Plugin: setting up* is the plugin's request's part less the same part of "
                "the *engine, base* request:", "",
                "| docs | segments read | " + " | ".join(label for label, _, _ in WHERE_ROWS) + " |",
                "|---:|---:|" + "---:|" * len(WHERE_ROWS)]
        for r in profiled_rows:
            feats, own = r["engine_profile"]["engine_features"], r["engine_profile"]["engine_base"]
            cells = []
            for _, names, less in WHERE_ROWS:
                part = next((name for name in names if name in feats), names[0])
                v = feats.get(part)
                cells.append("—" if v is None else f"{v - (own.get(part, 0.0) if less else 0.0):.2f}")
            out.append(f"| {r['docs']} | {feats.get('segments', 0):.1f} | " + " | ".join(cells) + " |")
    if has_plot:
        out += ["", f"![cost against collection size]({stem.with_suffix('.svg').name})"]
    write_report("\n".join(out), stem.with_suffix(".md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
