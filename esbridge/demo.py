"""``esbridge demo``: the engine's BM25 and esbridge side by side on a judged collection.

Without a dataset the demo runs on a SciFact sample shipped in the package
(``esbridge/resources/demo/scifact-sample``: 50 judged test claims, 1,000 abstracts;
CC BY-NC 2.0, Wadden et al., EMNLP 2020), unpacked once under ``$ESBRIDGE_HOME/demo/``.
A BEIR name or folder works too (:func:`esbridge.evaluation.datasets.load_dataset`).

For every judged query it keeps two rankings of the same index: the engine's own BM25
first stage (its ``_score`` order), and esbridge's — the hybrid pipeline with the shipped
defaults where the ``semantic`` extra is installed, else the ``evolved`` reranker over
that first stage.  Both are measured with :func:`esbridge.evaluation.metrics.per_query_metrics`
(the ``eval`` command's measures), and :func:`render` prints a few queries side by side
with the judged documents marked, then nDCG@10 of both over every judged query.
"""

from __future__ import annotations

import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from esbridge.beirfolder import member, needs_unpacking, readable_folder, unpack
from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError, IngestError
from esbridge.evaluation.datasets import BeirDataset, SplitSpec, load_dataset
from esbridge.home import cache_dir
from esbridge.index.definitions import VectorField
from esbridge.semantic.models import DEFAULT_MODEL as PIPELINE_MODEL

__all__ = [
    "SAMPLE_NAME",
    "DemoResult",
    "QueryView",
    "ensure_demo_index",
    "materialise_sample",
    "render",
    "resolve_dataset",
    "run_demo",
    "working",
]

#: The shipped collection's name (its index is ``esbridge-demo-<name>``).
SAMPLE_NAME = "scifact-sample"
#: The engine's default BM25 (k1, b): the demo index is what ``esbridge index`` creates.
DEMO_BM25 = (1.2, 0.75)
WIDTH = 98
CHECK = "\u2713"


# ---- progress ------------------------------------------------------------------------------

class working:
    """A line on standard error that ticks the elapsed seconds while a silent step runs.

    Shown only once the step has taken ``delay`` seconds; ended with ``done`` when it ends::

        with working("starting the local opensearch node"):
            engine = connect(args)

    What the step itself writes to standard error (``esbridge: using the local opensearch node ...``)
    goes on a line of its own: the ticking line is cleared first and drawn again below it.
    """

    def __init__(self, what: str, *, enabled: bool = True, delay: float = 1.0) -> None:
        self.what = what
        self.enabled = enabled
        self.delay = delay
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._shown = False
        self._drawn = ""  # the text on the terminal's current line, if the ticking line is there
        self._midline = False  # another write left a line unfinished: no ticking over it
        self._lock = threading.Lock()
        self._start = 0.0
        self._stream: Any = None

    def _text(self) -> str:
        return f"{self.what} ... {time.monotonic() - self._start:.0f}s "

    def _tick(self) -> None:
        if self._stop.wait(self.delay):
            return
        while True:
            with self._lock:
                if not self._midline:
                    self._shown = True
                    self._drawn = self._text()
                    self._stream.write(f"\r{self._drawn}")
                    self._stream.flush()
            if self._stop.wait(1.0):
                return

    def _clear(self) -> None:
        """Clear the ticking line (before another write to standard error): the caller holds the lock."""
        if self._drawn:
            self._stream.write("\r" + " " * len(self._drawn) + "\r")
            self._drawn = ""

    def __enter__(self) -> working:
        if self.enabled:
            self._start = time.monotonic()
            self._stream = sys.stderr
            sys.stderr = _ClearingStream(self, self._stream)
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._stream is not None and isinstance(sys.stderr, _ClearingStream) and sys.stderr.line is self:
            sys.stderr = self._stream
        if self._shown and not self._midline:
            self._stream.write(f"\r{self._text()}done\n" if exc[0] is None else "\n" if self._drawn else "")
            self._stream.flush()


class _ClearingStream:
    """Standard error while a :class:`working` line shows: every write clears that line first."""

    def __init__(self, line: working, stream: Any) -> None:
        self.line = line
        self.stream = stream

    def write(self, text: str) -> int:
        with self.line._lock:
            self.line._clear()
            if text:
                self.line._midline = not text.endswith("\n")
            return int(self.stream.write(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


# ---- the collection ------------------------------------------------------------------------

def _sample_files() -> Any:
    return resources.files("esbridge.resources").joinpath("demo", SAMPLE_NAME)


def materialise_sample(home: Path | None = None) -> BeirDataset:
    """The shipped sample as a BEIR folder under ``$ESBRIDGE_HOME/demo/`` (unpacked when absent
    or different from the packaged files, by :func:`esbridge.beirfolder.unpack`)."""
    src = _sample_files()
    files = ("corpus.jsonl.gz", "queries.jsonl", "qrels/test.tsv")
    missing = [rel for rel in files if not member(src, rel).is_file()]
    if missing:
        raise ConfigurationError(f"the demo collection's file {missing[0]} is missing from the installed package; "
                                 "reinstall esbridge")
    return BeirDataset(unpack(src, files, (home or cache_dir()) / "demo" / SAMPLE_NAME), SAMPLE_NAME)


def resolve_dataset(spec: str | None, *, progress: bool = False) -> BeirDataset:
    """The shipped sample (``spec`` ``None``), else a BEIR folder or name (downloaded once)."""
    if spec is None:
        return materialise_sample()
    folder = Path(spec).expanduser()
    if folder.is_dir() and needs_unpacking(folder):  # corpus.jsonl.gz: its unpacked copy, under its own name
        try:
            return load_dataset(readable_folder(folder), name=folder.resolve().name)
        except OSError as err:
            raise ConfigurationError(f"the BEIR folder {spec!r} cannot be unpacked: {err}") from err
    return load_dataset(spec, progress=progress)


# ---- the index -----------------------------------------------------------------------------

def _counted(docs: Iterable[Any], bar: Any) -> Iterator[Any]:
    for doc in docs:
        yield doc
        bar.update(1)


def ensure_demo_index(engine: Engine, dataset: BeirDataset, name: str, *, progress: bool = False,
                      vector: VectorField | None = None,
                      document_vectors: Sequence[VectorField] = ()) -> tuple[str, bool]:
    """``name`` holding ``dataset``'s corpus with the engine's default BM25 (and the engine vector
    field ``vector`` and whole-document vector fields ``document_vectors``, if given), indexed only
    when its recorded content fingerprint (the ``eval`` command's) does not match.

    Returns:
        ``(name, built)``.
    """
    from tqdm import tqdm

    from esbridge.evaluation.indexing import IndexSpec, mapping_fingerprint
    from esbridge.index.definitions import IndexLayout, create_index, index_meta
    from esbridge.ingest import ingest, read_jsonl

    layout = IndexLayout()
    total = dataset.corpus_size()
    spec = IndexSpec(corpus_sha256=dataset.fingerprint(),
                     mapping_sha256=mapping_fingerprint(layout, DEMO_BM25, vector, document_vectors), docs=total,
                     bm25=DEMO_BM25)
    if engine.index_exists(name):
        if index_meta(engine, name).get("eval") == spec.meta()["eval"] and engine.count(name) == total:
            return name, False
        engine.delete_index(name)
    create_index(engine, name, layout, shards=1, bm25=DEMO_BM25, meta=spec.meta(), vector=vector,
                 document_vectors=document_vectors)
    bar = tqdm(total=total, desc=f"indexing {name}", unit="doc", disable=not progress, file=sys.stderr)
    try:
        with bar:
            ingest(engine, name, _counted(read_jsonl(dataset.corpus_path), bar), layout=layout, create=False,
                   chunk_docs=100, progress=False, strict=True)
    except IngestError:
        engine.delete_index(name)  # a partial index is never reused
        raise
    return name, True


# ---- the runs ------------------------------------------------------------------------------

@dataclass
class QueryView:
    """One query as the demo shows it."""

    id: str
    text: str
    relevant: dict[str, int]
    engine: list[str]
    esbridge: list[str]


@dataclass
class DemoResult:
    """Both systems' runs on every judged query, their nDCG@10, and what to show.

    Attributes:
        runs: ``{"engine": {qid: [doc, ...]}, "esbridge": {...}}`` best first.
        ndcg: per system, nDCG@10 per query.
        mean: per system, the mean nDCG@10 over ``queries``.
        titles: titles of the documents shown.
    """

    dataset: str
    index: str
    engine_label: str
    url: str
    system: str
    system_note: str
    queries: list[str]
    qrels: dict[str, dict[str, int]]
    runs: dict[str, dict[str, list[str]]]
    ndcg: dict[str, dict[str, float]]
    mean: dict[str, float]
    measured_by: str
    shown: list[QueryView] = field(default_factory=list)
    differing: int = 0
    moved: int = 0
    top: int = 5
    titles: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _ndcg10(qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Sequence[str]]) -> tuple[dict[str, float], str]:
    """nDCG@10 per query by the ``eval`` command's measures (ir-measures); where that package is
    not installed, by :class:`~esbridge.evaluation.metrics.FastJudge`, which the test suite pins
    to it."""
    import numpy as np

    from esbridge.evaluation.metrics import FastJudge, per_query_metrics

    try:
        per_query = {q: m["ndcg@10"] for q, m in per_query_metrics(qrels, run).items()}
        return per_query, "ir-measures, trec_eval's ndcg_cut.10"
    except ConfigurationError:
        out = {}
        for q, judged in qrels.items():
            ids = list(dict.fromkeys(run.get(q, [])))
            judge = FastJudge.build(ids, judged)
            out[q] = judge.ndcg10_recall(-np.arange(len(ids), dtype=np.float64))[0] if ids else 0.0
        return out, "esbridge's FastJudge, equal to trec_eval's ndcg_cut.10"


def _titles(engine: Engine, index: str, ids: Sequence[str]) -> dict[str, str]:
    if not ids:
        return {}
    resp = engine.search(index, {"size": len(ids), "query": {"ids": {"values": list(ids)}},
                                 "_source": {"includes": ["title", "text"]}})
    out = {}
    for h in resp["hits"]["hits"]:
        src = h.get("_source") or {}
        out[str(h["_id"])] = " ".join(str(src.get("title") or src.get("text") or "").split())
    return out


def run_demo(engine: Engine, dataset: BeirDataset, *, index: str | None = None, hybrid: bool | None = None,
             window: int = 1000, show: int = 3, top: int = 5, progress: bool = False,
             split: str = "test", model: str | None = None, pipeline: str = "default") -> DemoResult:
    """Index ``dataset`` if needed and rank every judged query of ``split`` with the engine's BM25
    and with esbridge.

    Args:
        hybrid: ``True`` the hybrid pipeline, ``False`` the ``evolved`` reranker, ``None`` the
            pipeline where the ``semantic`` extra is installed.
        window: first-stage hits the engine returns and esbridge reranks.
        show: queries to show side by side: the first judged queries whose top ``top`` differ.
        model: the hybrid pipeline's sentence-embedding model (default: the pipeline's).
        pipeline: the hybrid pipeline's named parameters (:data:`esbridge.hybrid.pipeline.PRESETS`);
            the index gets the engine fields of the whole-document vectors they read, and every
            vector is embedded before the queries run.
    """
    from tqdm import tqdm

    from esbridge.evaluation.indexing import index_name
    from esbridge.rerank import Ranking, Reranker
    from esbridge.semantic.encoder import available

    notes: list[str] = []
    if hybrid is None or hybrid:
        if available():
            hybrid = True
        else:
            if hybrid:
                notes.append("the hybrid pipeline needs the 'semantic' extra (pip install 'esbridge[semantic]'); "
                             "showing the evolved reranker instead")
            hybrid = False
    split_spec = SplitSpec.parse(split)
    queries = dataset.queries(split_spec)
    qrels = dataset.qrels(split_spec)
    if not queries:
        raise ConfigurationError(f"collection {dataset.name!r} has no judged queries in split {split!r}")
    name = index or index_name("esbridge-demo", dataset, None)
    encoder = vector = params = None
    document_fields: list[VectorField] = []
    if hybrid:
        from esbridge.hybrid import PipelineParams
        from esbridge.semantic.engine_vectors import new_document_vector_fields, new_vector_field
        from esbridge.semantic.models import load_encoder

        params = PipelineParams.preset(pipeline).with_overrides(
            model=model or PIPELINE_MODEL, **({"window": window} if pipeline == "default" else {}))
        with working("loading the sentence-embedding model", enabled=progress):
            encoder = load_encoder(params.model)
            whole = ([encoder] if params.w_document > 0 else []) + [load_encoder(m) for m in params.ensemble]
        vector = new_vector_field(engine, encoder)  # in the engine where it searches vectors
        document_fields = new_document_vector_fields(engine, vector, whole)
    name, built = ensure_demo_index(engine, dataset, name, progress=progress, vector=vector,
                                    document_vectors=document_fields)
    if not built:
        notes.append(f"index {name!r} already held this collection and was reused")
    rr = Reranker(engine, name, scorer="evolved", window=window)
    limit = rr.max_result_window()
    if window > limit:
        raise ConfigurationError(f"window {window} is above index.max_result_window ({limit}) of {name!r}")
    searcher = None
    if encoder is not None:
        from esbridge.hybrid import HybridSearcher
        from esbridge.semantic.engine_vectors import open_vectors

        assert rr.layout is not None and params is not None
        vectors = open_vectors(engine, name, encoder, fields=rr.layout.fields, progress=progress)
        searcher = HybridSearcher(engine, name, params, vectors=vectors, progress=progress,
                                  reranker=rr if rr.scorer == params.scorer else None)
        searcher.build_vectors()  # the whole documents the lists read, embedded now rather than by a query
        weights = ", ".join(f"{k} {v:g}" for k, v in params.weights.items())
        system = "esbridge hybrid"
        lists = "".join(f", {n} kNN" for n in params.document_lists)
        what = "with its shipped defaults" if pipeline == "default" else f"with its {pipeline!r} parameters"
        note = (f"esbridge hybrid: the hybrid pipeline {what} ({encoder.name} semantic search{lists}, "
                f"{params.scorer} over the engine's top {params.window}, keyword feedback; {params.fusion.value} "
                f"fusion, weights {weights})")
    else:
        system = "esbridge evolved"
        note = f"esbridge evolved: esbridge's evolved scorer reranking the engine's top {window}"

    runs: dict[str, dict[str, list[str]]] = {"engine": {}, "esbridge": {}}
    try:
        for q in tqdm(queries, desc=f"ranking {len(queries)} judged queries", unit="query",
                      disable=not progress, file=sys.stderr):
            prepared = rr.analyze(q.text)
            hits = rr.fetch_candidates(prepared, q.text, window=window)["hits"]["hits"]
            runs["engine"][q.id] = Ranking.of([str(h["_id"]) for h in hits], [float(h["_score"]) for h in hits]).ids
            if searcher is not None:
                runs["esbridge"][q.id] = searcher.run(q.text).ids
            else:
                runs["esbridge"][q.id] = rr.rank(prepared, hits, stats_validated=True).ids
    finally:
        if searcher is not None:
            searcher.close()
        else:
            rr.close()

    qids = [q.id for q in queries]
    ndcg: dict[str, dict[str, float]] = {}
    measured_by = ""
    for sysname, run in runs.items():
        ndcg[sysname], measured_by = _ndcg10(qrels, run)
    mean = {s: sum(v[q] for q in qids) / len(qids) for s, v in ndcg.items()}

    # shown: in file order, the queries whose nDCG@10 differs (wins and losses alike), then those whose
    # top ranks differ; never chosen by which system wins
    differing = [q for q in queries if runs["engine"][q.id][:top] != runs["esbridge"][q.id][:top]]
    moved = [q for q in differing if abs(ndcg["engine"][q.id] - ndcg["esbridge"][q.id]) > 1e-12]
    picked = (moved + [q for q in differing if q not in moved])[:show]
    shown = [QueryView(q.id, q.text, dict(qrels[q.id]), runs["engine"][q.id][:top], runs["esbridge"][q.id][:top])
             for q in picked]
    wanted = list(dict.fromkeys(d for v in shown for d in (*v.engine, *v.esbridge, *v.relevant)))
    return DemoResult(
        dataset=dataset.name, index=name, engine_label=engine.info.label, url=engine.options.display_url,
        system=system, system_note=note, queries=qids, qrels=qrels, runs=runs, ndcg=ndcg, mean=mean,
        measured_by=measured_by, shown=shown, differing=len(differing), moved=len(moved), top=top,
        titles=_titles(engine, name, wanted), notes=notes)


# ---- the output ----------------------------------------------------------------------------

def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3].rstrip() + "..."


def _cell(doc: str | None, titles: Mapping[str, str], relevant: Mapping[str, int], width: int) -> str:
    if doc is None:
        return " " * width
    mark = CHECK if relevant.get(doc, 0) > 0 else " "
    return f"{_short(mark + ' ' + (titles.get(doc) or f'(document {doc})'), width):<{width}}"


def _rank_of(doc: str, run: Sequence[str]) -> str:
    try:
        return str(run.index(doc) + 1)
    except ValueError:
        return "not found"


def render(result: DemoResult, stop_hint: Sequence[str] = ()) -> str:
    """The demo's report: the queries side by side, nDCG@10 of both, what is still running."""
    col = (WIDTH - 4 - 6) // 2
    lines: list[str] = []

    def para(text: str, indent: str = "  ") -> None:
        lines.extend(textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False))

    n = len(result.queries)
    para(f"{result.dataset}: {n} judged queries, index {result.index!r} on {result.engine_label} at {result.url}")
    para("engine BM25: the engine's own ranking (its BM25 first stage)")
    para(result.system_note)
    for note in result.notes:
        para(note)
    lines.append("")
    if result.shown:
        para(f"{len(result.shown)} queries, the first in file order whose nDCG@10 differs ({result.moved} of {n} "
             f"do) or, after those, whose top {result.top} differ ({result.differing} of {n} do). "
             f"{CHECK} = judged relevant.", indent="")
    else:
        para(f"The engine's and esbridge's top {result.top} are the same on every judged query.", indent="")
    for view in result.shown:
        lines.append("")
        para(f"query {view.id}: {view.text}")
        lines.append(f"{'rank':>4} | {'engine BM25':<{col}} | {result.system}")
        lines.append(f"{'-' * 4}-+-{'-' * col}-+-{'-' * col}")
        for i in range(result.top):
            left = view.engine[i] if i < len(view.engine) else None
            right = view.esbridge[i] if i < len(view.esbridge) else None
            lines.append(f"{i + 1:>4} | {_cell(left, result.titles, view.relevant, col)} | "
                         f"{_cell(right, result.titles, view.relevant, col)}".rstrip())
        for d in (d for d, g in view.relevant.items() if g > 0):
            para(f"{CHECK} {_short(result.titles.get(d) or f'(document {d})', 52)}: rank "
                 f"{_rank_of(d, result.runs['engine'][view.id])} by the engine, "
                 f"{_rank_of(d, result.runs['esbridge'][view.id])} by esbridge", indent="    ")
        lines.append(f"  nDCG@10: engine {result.ndcg['engine'][view.id]:.3f}, "
                     f"esbridge {result.ndcg['esbridge'][view.id]:.3f}")
    eng, esb = result.mean["engine"], result.mean["esbridge"]
    better = sum(result.ndcg["esbridge"][q] > result.ndcg["engine"][q] + 1e-12 for q in result.queries)
    worse = sum(result.ndcg["esbridge"][q] < result.ndcg["engine"][q] - 1e-12 for q in result.queries)
    lines.append("")
    para(f"nDCG@10 over {n} judged queries: engine BM25 {eng:.3f}, {result.system} {esb:.3f} "
         f"({(esb - eng) * 100:+.1f} points)", indent="")
    para(f"{result.system} is better on {better} queries, worse on {worse}, equal on {n - better - worse} "
         f"(measured by {result.measured_by}).", indent="")
    if "hybrid" not in result.system:
        para("The lexical scorer alone is not where esbridge's gain is: reranking the engine's own candidates by "
             "term statistics moves few of them (a difference of a point or two on a few dozen queries is "
             "noise; the per-collection figures are in docs/evaluation.md). The gain is in the hybrid "
             "pipeline: run `esbridge demo` without --lexical.", indent="")
    if stop_hint:
        lines.append("")
        for line in stop_hint:
            para(line, indent="    ")
    return "\n".join(lines) + "\n"


def stop_hint(url: str, index: str) -> list[str]:
    """What the demo leaves running, and how to stop it (a password in ``url`` shown as ``***``)."""
    from esbridge.engine.connection import redact_url
    from esbridge.nodes.local import running_nodes

    base = url.rstrip("/")
    for node in running_nodes():
        if node.url.rstrip("/") == base:
            return [f"Still running: esbridge's local {node.distribution} node {node.name!r} at {node.url} "
                    f"(process {node.pid}), holding the index {index!r}.",
                    f"Search it: esbridge search {index} \"your query\" --url {node.url}",
                    f"Stop it: esbridge engine stop --name {node.name}"]
    shown = redact_url(base)
    return [f"The index {index!r} stays on the engine at {shown}, which esbridge did not start; "
            f"delete it with: curl -X DELETE '{shown}/{index}'"]


def connect_with_progress(args: Any, connect: Callable[[Any], Engine], *, progress: bool = False) -> Engine:
    """``connect(args)``, with visible progress where it has to start a local node."""
    import os

    from esbridge.nodes.provision import find_local_node

    if args.url or os.environ.get("ESBRIDGE_URL") or find_local_node(args.distribution) is not None:
        return connect(args)
    from esbridge.nodes import artifacts

    distribution = args.distribution or artifacts.DEFAULT_DISTRIBUTION
    artifacts.install(distribution, progress=progress)  # its own bar when jars are downloaded
    with working(f"starting esbridge's local {distribution} node (about a minute)", enabled=progress):
        return connect(args)
