"""Features for learning to rank, from the reranker's own pipeline.

For each topic, the engine's first stage finds the top ``window`` candidates
(:meth:`Reranker.analyze`, then :meth:`Reranker.fetch_candidates`); each scorer's reranker
scores them through the path every command ranks by (:meth:`Reranker.rank`: features, then
scores and their parts).  Only the
scorers asked for are built, so an index of yours without esbridge's channels serves the
scorers that read its text fields alone (``bm25``, ``bmx``, the BM25F scorers, ...).  Every
candidate becomes one line:

- ``svmrank`` (SVMrank, RankLib, LETOR, scikit-learn's ``load_svmlight_file(query_id=True)``)::

      label qid:QID 1:v1 2:v2 ... # docid

- ``lightgbm``: LightGBM's own reader takes LibSVM lines without ``qid:`` and without a
  comment, and the groups from a file beside the data (``<file>.query``, the number of lines of
  each query, in order)::

      label 1:v1 2:v2 ...

  with the ids of each line in ``<file>.docids`` (``qid<TAB>topic<TAB>docid``), to map
  predictions back to documents.

The features, numbered from 1, are the engine's first-stage ``_score``, each scorer's score and
each part its :class:`~esbridge.scoring.ScoreResult` exposes (the evolved formula's per-channel
evidence, multipliers and ``R``, BMX's similarity and entropy terms, ...), as ``esbridge search
--explain`` shows them.  ``<file>.features.json`` names every feature index, the topic of each
``qid`` and the settings.  The label is the judged grade of the candidate (0 where unjudged, or
everywhere without judgments).
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError, IndexNotFoundError
from esbridge.evaluation.trecfiles import Topic, read_qrels, read_topics
from esbridge.features.cache import TermVectorCache
from esbridge.features.entropy import CollectionEntropy
from esbridge.rerank import Reranker, SharedAnalysis
from esbridge.scoring import available_scorers, get_scorer

__all__ = ["ENGINE_FEATURE", "FORMATS", "ExportReport", "export_features", "feature_files"]

#: Output formats.
FORMATS = ("svmrank", "lightgbm")
#: The name of feature 1, the engine's first-stage score.
ENGINE_FEATURE = "engine_bm25"


@dataclass
class ExportReport:
    """What :func:`export_features` wrote.

    Attributes:
        output: the feature file.
        sidecar: ``<output>.features.json``, naming every feature.
        extra: the other files written (LightGBM's ``.query`` and ``.docids``).
        features: the feature names; feature ``i`` (from 1) is ``features[i - 1]``.
        topics: topics written (those with candidates).
        lines: candidate lines written.
        without_candidates: topics the first stage found nothing for (no lines).
        unjudged: topics without judgments (all labels 0), when judgments were given.
    """

    output: Path
    sidecar: Path
    extra: list[Path]
    features: list[str]
    topics: int
    lines: int
    without_candidates: list[str] = field(default_factory=list)
    unjudged: list[str] = field(default_factory=list)

    def summary(self) -> str:
        extra = "".join(f", {p.name}" for p in self.extra)
        return (f"{self.lines} candidates of {self.topics} topics, {len(self.features)} features, "
                f"written to {self.output} (names in {self.sidecar.name}{extra})")


def feature_files(output: str | Path, fmt: str) -> tuple[Path, list[Path]]:
    """The sidecar and the other files written beside ``output`` in format ``fmt``."""
    out = Path(output)
    extra = [Path(f"{out}.query"), Path(f"{out}.docids")] if fmt == "lightgbm" else []
    return Path(f"{out}.features.json"), extra


def _qids(topics: Sequence[Topic]) -> dict[str, int]:
    """Each topic's ``qid``: its id where every id is a plain non-negative integer, else its
    position in the topics file (from 1).  Both formats need integer query ids."""
    if all(t.id.isascii() and t.id.isdigit() and str(int(t.id)) == t.id for t in topics):
        return {t.id: int(t.id) for t in topics}
    return {t.id: i for i, t in enumerate(topics, start=1)}


def _number(value: float, name: str, topic: str, doc: str) -> str:
    if not math.isfinite(value):
        raise ConfigurationError(f"feature {name!r} of document {doc!r} for topic {topic!r} is {value}; "
                                 "the feature file takes finite numbers only")
    return repr(float(value))


def _comment(doc: str) -> str:
    """A document id as the line's comment (JSON-quoted if it would break the line)."""
    return json.dumps(doc) if any(c in doc for c in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029") else doc


class _Writer:
    """Feature lines into the output (and LightGBM's group and id files), numbering the
    features in order of appearance."""

    def __init__(self, fmt: str, data: TextIO, groups: TextIO | None, docids: TextIO | None) -> None:
        self.fmt = fmt
        self.data, self.groups, self.docids = data, groups, docids
        self.names: list[str] = []
        self.number: dict[str, int] = {}
        self.lines = 0

    def index_of(self, name: str) -> int:
        if name not in self.number:
            self.names.append(name)
            self.number[name] = len(self.names)
        return self.number[name]

    def query(self, qid: int, topic: str, docs: Sequence[str], labels: Sequence[int],
              columns: Mapping[str, np.ndarray]) -> None:
        numbered = sorted((self.index_of(name), name, values) for name, values in columns.items())
        out = []
        for i, doc in enumerate(docs):
            values = " ".join(f"{k}:{_number(float(v[i]), name, topic, doc)}" for k, name, v in numbered)
            if self.fmt == "svmrank":
                out.append(f"{labels[i]} qid:{qid} {values} # {_comment(doc)}\n")
            else:
                out.append(f"{labels[i]} {values}\n")
        self.data.write("".join(out))
        if self.groups is not None:
            self.groups.write(f"{len(docs)}\n")
        if self.docids is not None:
            self.docids.write("".join(f"{qid}\t{topic}\t{_comment(doc)}\n" for doc in docs))
        self.lines += len(docs)


def export_features(engine: Engine, index: str, topics: Sequence[Topic] | str | Path, output: str | Path, *,
                    qrels: Mapping[str, Mapping[str, int]] | str | Path | None = None, window: int = 1000,
                    fmt: str = "svmrank", scorers: Sequence[str] | None = None,
                    params: Mapping[str, Any] | None = None, topic_field: str = "title",
                    fields: str | Sequence[str] | None = None, progress: bool = False) -> ExportReport:
    """Write the learning-to-rank features of every topic's first-stage candidates.

    Args:
        engine: the connected engine.
        index: an index created by esbridge, or one of yours (a plain index, see
            :func:`esbridge.index.open_layout`): scorers that read only the ``base`` channel
            (``bm25``, ``bmx``, the BM25F scorers, ...) work on its text fields.
        topics: the topics, or a topics file (:func:`~esbridge.evaluation.trecfiles.read_topics`).
        output: the feature file; ``<output>.features.json`` (and, for LightGBM, ``.query`` and
            ``.docids``) are written beside it.  Each file is written whole, then moved into place.
        qrels: judgments (``{topic: {doc: grade}}``) or a judgments file; ``None``: every label 0.
        window: first-stage candidates per topic.
        fmt: ``svmrank`` or ``lightgbm`` (see the module's description).
        scorers: the scorers whose scores and parts are features (default: every registered one,
            in name order).
        params: a scorer's parameter object by scorer name (default: its defaults).
        topic_field: with a TREC topics file, what the query text is (``title``, ``desc``,
            ``title+desc``).
        fields: the text fields to read, as :class:`~esbridge.rerank.Reranker`'s ``fields``
            (default: every text field of an esbridge index, those a plain index's mapping has).

    Raises:
        ConfigurationError: a wrong format, window or scorer, a scorer that needs channels the
            index lacks (the message names the scorer and the channels), or a candidate that left
            the index while its features were read.
        InputFileError: an unreadable or malformed topics or judgments file (the message names
            the file and the line); raised before the engine is reached.
        IndexNotFoundError: ``index`` does not exist.
    """
    if fmt not in FORMATS:
        raise ConfigurationError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ConfigurationError(f"window must be an integer >= 1, got {window!r}")
    names = list(scorers) if scorers is not None else available_scorers()
    if not names:
        raise ConfigurationError("give at least one scorer")
    if len(set(names)) != len(names):
        raise ConfigurationError(f"a scorer is named twice in {', '.join(names)}")
    for name in names:
        get_scorer(name)  # unknown names fail here, listing the valid ones
    for name in params or {}:
        if name not in names:
            raise ConfigurationError(f"parameters given for {name!r}, which is not among the scorers "
                                     f"{', '.join(names)}")
    topic_list = read_topics(topics, topic_field) if isinstance(topics, (str, Path)) else list(topics)
    judged = read_qrels(qrels) if isinstance(qrels, (str, Path)) else qrels
    if not engine.index_exists(index):
        raise IndexNotFoundError(f"index {index!r} does not exist at {engine.options.display_url}; create it "
                                 "with `esbridge index`", index=index)

    out = Path(output)
    sidecar, extra = feature_files(out, fmt)
    qids = _qids(topic_list)
    vectors = TermVectorCache()
    rerankers: dict[str, Reranker] = {}
    parts = [Path(f"{p}.part") for p in (out, *extra)]
    without: list[str] = []
    queries: list[dict[str, Any]] = []
    from tqdm import tqdm

    try:
        # only the scorers asked for: each reranker checks that the index has the channels its scorer
        # reads (the error names the scorer and what is missing); they share the first one's layout
        for name in names:
            rerankers[name] = Reranker(engine, index, scorer=name, params=(params or {}).get(name), window=window,
                                       vector_cache=vectors, fields=fields,
                                       layout=rerankers[names[0]].layout if rerankers else None)
        lead = rerankers[names[0]]  # the first stage (the engine's BM25 over the base channel) is the same for all
        shared = SharedAnalysis(list(rerankers.values()))  # one analysis per topic where its channels serve
        entropy = None
        for rr in rerankers.values():
            if get_scorer(rr.scorer).needs_entropy:  # one collection entropy for BMX and its normalised form
                entropy = entropy or CollectionEntropy(engine, index, rr._layout, progress=progress)
                rr._entropy = entropy
        with ExitStack() as files:
            opened = [files.enter_context(open(p, "w", encoding="utf-8")) for p in parts]
            writer = _Writer(fmt, opened[0], *(opened[1:] if extra else (None, None)))
            for name in (ENGINE_FEATURE, *names):  # the scores first, then the parts as they come
                writer.index_of(name)
            for topic in tqdm(topic_list, desc="features", unit="topic", disable=not progress, file=sys.stderr):
                text = topic.text(topic_field)
                # the reranker's own path: analysis, first stage, then candidates -> features -> scores
                analysed = shared.analyse(text)
                hits = lead.fetch_candidates(analysed[lead.scorer], text, window=window)["hits"]["hits"]
                if not hits:
                    without.append(topic.id)
                    continue
                ids = [str(h["_id"]) for h in hits]
                columns: dict[str, np.ndarray] = {
                    ENGINE_FEATURE: np.array([float(h["_score"]) for h in hits], dtype=np.float64)}
                for name, rr in rerankers.items():
                    ranking = rr.rank(analysed[name], hits)  # each score and its parts, in the hits' order
                    if ranking.dropped:
                        raise ConfigurationError(
                            f"{len(ranking.dropped)} candidate(s) of topic {topic.id!r} left {index!r} while the "
                            f"features were read (deleted or replaced?): {', '.join(ranking.dropped[:5])}; export "
                            "again")
                    columns[name] = ranking.result.scores
                    for part, values in ranking.result.parts.items():
                        if np.ndim(values) == 1 and len(values) == len(ids):
                            columns[f"{name}.{part}"] = np.asarray(values, dtype=np.float64)
                grades = (judged or {}).get(topic.id, {})
                labels = [int(grades.get(doc, 0)) for doc in ids]
                writer.query(qids[topic.id], topic.id, ids, labels, columns)
                queries.append({"qid": qids[topic.id], "topic": topic.id, "candidates": len(ids),
                                "judged": topic.id in (judged or {}),
                                "relevant": sum(1 for g in labels if g > 0)})
        for written, final in zip(parts, (out, *extra)):
            os.replace(written, final)
    finally:
        for p in parts:
            p.unlink(missing_ok=True)
        for rr in rerankers.values():
            rr.close()

    unjudged = [t.id for t in topic_list if judged is not None and t.id not in judged]
    layout = lead._layout
    meta = {
        "format": fmt,
        "file": out.name,
        "files": {"groups": extra[0].name, "docids": extra[1].name} if extra else {},
        "index": index,
        "window": window,
        "first_stage": f"the engine's BM25 over {', '.join(layout.indexed(layout.combined, 'base'))} "
                       "(the index's similarity)",
        "fields": list(layout.fields),
        "topic_field": topic_field,
        "judgments": judged is not None,
        "features": [{"index": i, "name": n, **_describe(n, names)} for i, n in enumerate(writer.names, start=1)],
        "scorers": {n: _jsonable(rr.params) for n, rr in rerankers.items()},
        "queries": queries,
        "without_candidates": without,
        "unjudged": unjudged,
        "engine": {"distribution": engine.distribution, "version": engine.info.number},
    }
    from esbridge.version import __version__

    meta["esbridge_version"] = __version__
    tmp = Path(f"{sidecar}.part")
    tmp.write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, sidecar)
    return ExportReport(output=out, sidecar=sidecar, extra=extra, features=list(writer.names),
                        topics=len(queries), lines=writer.lines, without_candidates=without, unjudged=unjudged)


def _describe(name: str, scorers: Sequence[str]) -> dict[str, str]:
    if name == ENGINE_FEATURE:
        return {"kind": "engine", "description": "the engine's first-stage _score"}
    if name in scorers:
        return {"kind": "score", "scorer": name}
    scorer, _, part = name.partition(".")
    return {"kind": "part", "scorer": scorer, "part": part}


def _jsonable(params: Any) -> dict[str, Any]:
    return {k: (v.value if hasattr(v, "value") else v) for k, v in asdict(params).items()}
