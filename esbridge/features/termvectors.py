"""Term vectors and index-wide statistics for a set of candidates, in one batched call.

For a query's per-channel terms and a list of candidate ids, :func:`fetch_features`
sends ``_mtermvectors`` requests holding

* the candidates, by id, with the channel sub-fields they need (term frequencies
  only: no positions, offsets or statistics), ``batch_size`` ids a request;
* one artificial document **per shard**, routed to that shard, whose fields
  hold the query's terms verbatim (``keyword`` analyzer), asking for term and
  field statistics of every channel sub-field.

For an index without stored term vectors (:attr:`IndexLayout.term_vectors`, known from its
settings), each candidate is asked once per channel with that channel's analyzer for its
text fields, which the engine analyses from ``_source``; the combined field's vector is
their sum, as ``copy_to`` indexes it.  (Reading the texts with ``_mget`` and sending them
back as artificial documents cost as much, in two requests: 199 against 189 ms for 100
SciFact candidates.)

For a plain index (:func:`esbridge.index.open_layout`) the channel sub-field of a text
field is the field itself, whose term vectors the engine computes from ``_source`` where
they are not stored; its virtual combined field stands for every text field: a
candidate's term frequencies and length are the sums over them, and the statistics are
merged as Lucene's ``combined_fields`` query merges them (:func:`merge_stats`).  Lengths
of fields whose analyzer may put several tokens at one position are counted in
positions, as Lucene's length norm counts them.

Where the engine connection has a shard-copy ``preference`` (the default,
:attr:`esbridge.engine.connection.ConnectionOptions.preference`), the artificial documents go
instead as one ``_termvectors`` request per shard, sent together: ``_mtermvectors`` sends
its documents to shard copies of the engine's choosing (its REST layer drops the
``preference``), and a replica's statistics can differ from its primary's (deleted
documents that one copy has merged away and the other still counts), so statistics read
that way could come from other copies than the search's, and from other copies from one
query to the next.

Term-vector statistics are those of the shard that answers, so the per-shard
answers are summed: ``df`` and ``N`` (``doc_count``) and ``sum_ttf`` over every
shard are exactly the collection statistics the engine itself uses under
``dfs_query_then_fetch``.  Like the engine's, they are Lucene's index
statistics: a deleted or updated document still counts until the segment that
holds it is merged away, so after deletions esbridge and the engine agree with
each other (both count the not-yet-merged deletions) rather than with a count
of live documents.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from esbridge.engine.calls import analyze_plan, path_segment
from esbridge.engine.client import Engine, EngineBase, sync_engine
from esbridge.engine.plan import Call, Plan, gather, run
from esbridge.errors import ConfigurationError, EngineError
from esbridge.index.definitions import EXACT_SIMILARITY, IndexLayout, channel_analyzers
from esbridge.scoring.arrays import ChannelArrays, FieldArrays, ScoringInput

#: Candidates per ``_mtermvectors`` request.
DEFAULT_BATCH_SIZE = 500
_PLACEHOLDER = "\u0000esbridge"


@dataclass(frozen=True)
class QueryChannel:
    """A channel's analysed query: distinct terms in first-seen order and their counts."""

    terms: tuple[str, ...]
    qtf: tuple[int, ...]

    @classmethod
    def from_tokens(cls, tokens: Iterable[str]) -> QueryChannel:
        counts: dict[str, int] = {}
        for tok in tokens:
            counts[tok] = counts.get(tok, 0) + 1
        return cls(tuple(counts), tuple(counts.values()))


@dataclass(frozen=True)
class FieldStats:
    """Index-wide statistics of one indexed (sub-)field for some terms."""

    doc_count: int
    sum_ttf: int
    df: dict[str, int] = field(default_factory=dict)

    @property
    def avgdl(self) -> float:
        """Lucene's mean length: ``sum_ttf / doc_count`` (0 for an empty field)."""
        return self.sum_ttf / self.doc_count if self.doc_count else 0.0


class FieldVector(dict[str, int]):
    """``{term: tf}`` of one document's (sub-)field, with its length: the sum of the tfs,
    unless given (the number of positions, for analyzers that stack tokens), or that of
    ``freqs`` when it is a :class:`FieldVector` itself."""

    __slots__ = ("length",)
    length: int

    def __init__(self, freqs: Mapping[str, int] | Iterable[tuple[str, int]], length: int | None = None) -> None:
        super().__init__(freqs)
        if length is None:
            length = freqs.length if isinstance(freqs, FieldVector) else sum(self.values())
        self.length = length

    @property
    def distinct(self) -> int:
        """Distinct terms of the field."""
        return len(self)


@dataclass(frozen=True)
class TermMatrix:
    """Some candidates' frequencies of a query's terms in one sub-field, as arrays (what the
    feature store reads for one query, instead of each candidate's whole vector).

    Attributes:
        rows: ``(R,)`` the candidates (positions in :attr:`CandidateVectors.ids`) row ``k`` is about.
        terms: the terms, one column each.
        tf: ``(R, T)`` how often each term occurs in each candidate's sub-field.
        length: ``(R,)`` the sub-field's length (of the whole field, not of these terms).
        distinct: ``(R,)`` the sub-field's number of distinct terms.
    """

    rows: np.ndarray
    terms: tuple[str, ...]
    tf: np.ndarray
    length: np.ndarray
    distinct: np.ndarray

    def moved(self, rows: np.ndarray) -> TermMatrix:
        """The same matrix about other candidates: row ``k`` is now about ``rows[self.rows[k]]``."""
        return TermMatrix(rows=np.asarray(rows, dtype=np.int64)[self.rows], terms=self.terms, tf=self.tf,
                          length=self.length, distinct=self.distinct)


def sum_vectors(vectors: Sequence[FieldVector]) -> FieldVector:
    """The term frequencies of several fields of one document added up, and their lengths."""
    if len(vectors) == 1:
        return vectors[0]
    out: dict[str, int] = {}
    for vec in vectors:
        for term, tf in vec.items():
            out[term] = out.get(term, 0) + tf
    return FieldVector(out, length=sum(v.length for v in vectors))


def merge_stats(stats: Sequence[FieldStats]) -> FieldStats:
    """Statistics of several fields taken together, as Lucene's ``combined_fields`` query
    (``CombinedFieldQuery``) takes them: the largest document count and ``df`` of the
    fields, and the sum of their total term frequencies."""
    if len(stats) == 1:
        return stats[0]
    df: dict[str, int] = {}
    for st in stats:
        for term, n in st.df.items():
            df[term] = max(df.get(term, 0), n)
    return FieldStats(doc_count=max((st.doc_count for st in stats), default=0),
                      sum_ttf=sum(st.sum_ttf for st in stats), df=df)


EMPTY_VECTOR = FieldVector({})


@dataclass(frozen=True)
class CandidateVectors:
    """Raw per-candidate term frequencies: ``vectors[i][subfield] = {term: tf}``, or for the
    candidates a :class:`TermMatrix` of ``matrices[subfield]`` is about, that matrix's row
    (such a candidate's ``vectors[i]`` lacks the sub-field)."""

    ids: tuple[str, ...]
    vectors: tuple[dict[str, FieldVector], ...]
    found: tuple[bool, ...]
    versions: tuple[tuple[int, int] | None, ...] = ()
    matrices: Mapping[str, TermMatrix] = field(default_factory=dict)


def analyze_query(engine: Engine, index: str, layout: IndexLayout, text: str,
                  channels: Sequence[str]) -> dict[str, QueryChannel]:
    """The query's terms per channel, from the index's own analyzers (``_analyze``)."""
    return run(analyze_query_plan(index, layout, text, channels), engine)


def analyze_query_plan(index: str, layout: IndexLayout, text: str,
                       channels: Sequence[str]) -> Plan[dict[str, QueryChannel]]:
    """:func:`analyze_query` as a plan (:mod:`esbridge.engine.plan`)."""
    out = {}
    for ch in channels:
        out[ch] = QueryChannel.from_tokens((yield from analyze_text_plan(index, layout, text, ch)))
    return out


def analyze_text(engine: Engine, index: str, layout: IndexLayout, text: str, channel: str) -> list[str]:
    """The tokens of ``text`` as the index analyses ``channel`` (the engine's ``_analyze``):
    the combined field's sub-field of an esbridge index, the fields' search analyzer of a
    plain index."""
    return run(analyze_text_plan(index, layout, text, channel), engine)


def analyze_text_plan(index: str, layout: IndexLayout, text: str, channel: str) -> Plan[list[str]]:
    """:func:`analyze_text` as a plan (:mod:`esbridge.engine.plan`)."""
    if channel not in layout.channels:
        raise ConfigurationError(f"index {index!r} has no channel {channel!r}; it has {list(layout.channels)}")
    if not text:
        return []
    how = layout.analysis(channel)
    tokens: list[str] = yield from analyze_plan(index, text, field=how.get("field"), analyzer=how.get("analyzer"))
    return tokens


def _engine_fields(layout: IndexLayout, fields: Sequence[str], channels: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """``{key sub-field: the index's fields that make it up}`` for ``fields`` × ``channels``."""
    return {layout.subfield(f, ch): layout.indexed(f, ch) for f in fields for ch in channels}


class ShardRouting:
    """One routing value per shard of an index, so that a request can reach every shard."""

    def __init__(self, engine: EngineBase, index: str) -> None:
        self.engine = engine
        self.index = index
        self._routings: list[str] | None = None
        self._settings: Mapping[str, Any] | None = None
        #: whether some shard of the index has replicas (known once :meth:`routings_plan` ran)
        self.replicated = False

    def _settings_plan(self) -> Plan[Mapping[str, Any]]:
        if self._settings is None:
            self._settings = yield Call(
                "GET", f"/{path_segment(self.index, patterns=True)}/_settings/"
                       "index.number_of_shards,index.number_of_replicas,index.auto_expand_replicas,"
                       f"index.similarity.{EXACT_SIMILARITY}.type",
                context=f"reading the shard count of {self.index!r}")
        return self._settings

    def stores_term_vectors_plan(self) -> Plan[bool]:
        """Whether the index stores term vectors: not where its settings define the
        ``esbridge-features`` plugin's exact-length similarity (:attr:`IndexLayout.term_vectors`),
        whatever layout a caller describes it with (asked once, with the shard count)."""
        settings = yield from self._settings_plan()
        return not any((((spec.get("settings") or {}).get("index") or {}).get("similarity") or {}).get(EXACT_SIMILARITY)
                       for spec in settings.values())

    def routings(self) -> list[str]:
        return run(self.routings_plan(), sync_engine(self.engine))

    def routings_plan(self) -> Plan[list[str]]:
        """:meth:`routings` as a plan (asked once, then remembered)."""
        if self._routings is None:
            settings = yield from self._settings_plan()
            n_shards = 0
            for spec in settings.values():
                conf = spec["settings"]["index"]
                n_shards += int(conf["number_of_shards"])
                expand = str(conf.get("auto_expand_replicas", "false")).lower()
                self.replicated |= int(conf.get("number_of_replicas", 0)) > 0 or expand not in ("false", "0-0")
            by_shard: dict[tuple[str, int], str] = {}
            wanted = n_shards
            candidate = 0
            while len(by_shard) < wanted:
                if candidate > 64 * wanted + 64:
                    raise EngineError(
                        f"could not find a routing value for every shard of {self.index!r} "
                        f"({len(by_shard)} of {wanted} found)"
                    )
                resp = yield Call("GET", f"/{path_segment(self.index, patterns=True)}/_search_shards",
                                  params={"routing": str(candidate)},
                                  context=f"locating the shards of {self.index!r}")
                for group in resp["shards"]:
                    copy = group[0]
                    by_shard.setdefault((copy["index"], int(copy["shard"])), str(candidate))
                candidate += 1
            self._routings = sorted(set(by_shard.values()), key=int)
            if len(self._routings) < len(by_shard):  # several concrete indices behind an alias
                self._routings = list(by_shard.values())
        return list(self._routings)


def _stats_docs(layout: IndexLayout, query: Mapping[str, QueryChannel], fields: Sequence[str],
                routings: Sequence[str]) -> list[dict[str, Any]]:
    """One artificial document per shard carrying every channel's terms verbatim.

    Each channel sub-field sees the union of the channels' terms (``keyword``
    analyzer), so a term of one channel is also looked up in the others; only each
    channel's own terms are read back.
    """
    terms = list(dict.fromkeys(t for qc in query.values() for t in qc.terms)) or [_PLACEHOLDER]
    subfields = list(dict.fromkeys(sf for ch in query for f in fields for sf in layout.indexed(f, ch)))
    source = {layout.doc_path(m): terms for f in fields for m in layout.members(f)}
    return [{
        "doc": source,
        "routing": routing,
        "fields": subfields,
        "per_field_analyzer": {sf: "keyword" for sf in subfields},
        "term_statistics": True,
        "field_statistics": True,
        "positions": False,
        "offsets": False,
        "payloads": False,
    } for routing in routings]


def _shard_statistics_plan(index: str, stats_docs: Sequence[Mapping[str, Any]]) -> Plan[list[Any]]:
    """The answers to the artificial documents, one ``_termvectors`` request per shard (sent
    together), so that each carries the connection's shard-copy ``preference``."""
    def one(doc: Mapping[str, Any]) -> Plan[Any]:
        body = {k: v for k, v in doc.items() if k != "routing"}
        return (yield Call("POST", f"/{path_segment(index, patterns=True)}/_termvectors",
                           params={"routing": doc["routing"]}, body=body,
                           context=f"reading index-wide statistics of {index!r}"))

    answers = yield gather(*(one(doc) for doc in stats_docs))
    return list(answers)


def analyze_with_stats_plan(index: str, layout: IndexLayout, text: str, channels: Sequence[str],
                            routings: Sequence[str]) -> Plan[tuple[dict[str, QueryChannel], dict[str, FieldStats]]]:
    """``text`` analysed in ``channels`` of the combined field, and the index-wide statistics
    of its terms there, from one ``_termvectors`` request per shard (sent together).

    The request's artificial document holds the text in the combined field, which each
    channel sub-field analyses with its own analyzer — the one ``_analyze`` uses for it — and
    the answer lists each sub-field's terms with their positions, so the tokens come back in
    position order (tokens an analyzer stacks at one position, such as synonyms, in term order,
    not necessarily ``_analyze``'s), and that shard's document frequencies; summed over
    ``routings`` (one per shard, :class:`ShardRouting`) they are index-wide.  Statistics are
    returned only for the sub-fields every shard answered with field statistics (a channel
    that keeps no term of the text is left to :func:`fetch_raw`).  For an esbridge index,
    whose combined field is a field of the index; a plain index's is not (see
    :meth:`IndexLayout.analysis`).

    Raises:
        ConfigurationError: a plain layout, or no routings.
    """
    if layout.plain:
        raise ConfigurationError("a plain index's combined field is not a field of the index: analyse with _analyze")
    if not routings:
        raise ConfigurationError("analysing with statistics needs one routing value per shard")
    subfields = [layout.subfield(layout.combined, ch) for ch in channels]
    doc = {"doc": {layout.combined: text}, "fields": subfields, "positions": True, "offsets": False,
           "payloads": False, "term_statistics": True, "field_statistics": True}
    answers = yield from _shard_statistics_plan(index, [dict(doc, routing=r) for r in routings])
    first = answers[0].get("term_vectors") or {}
    query = {}
    for ch, sf in zip(channels, subfields, strict=True):
        terms = (first.get(sf) or {}).get("terms") or {}
        tokens = sorted((int(tok["position"]), term) for term, info in terms.items()
                        for tok in (info.get("tokens") or ()))
        query[ch] = QueryChannel.from_tokens(term for _, term in tokens)
    complete = [sf for sf in subfields
                if all(((ans.get("term_vectors") or {}).get(sf) or {}).get("field_statistics") for ans in answers)]
    return query, {sf: _sum_stats(answers, sf) for sf in complete}


def _candidate_doc(doc_id: str, subfields: Sequence[str], positions: bool = False) -> dict[str, Any]:
    return {
        "_id": doc_id,
        "fields": list(subfields),
        "term_statistics": False,
        "field_statistics": False,
        "positions": positions,
        "offsets": False,
        "payloads": False,
    }


def _reanalysed_docs(doc_id: str, layout: IndexLayout, channels: Sequence[str]) -> list[dict[str, Any]]:
    """``_mtermvectors`` entries for one candidate of an index without stored term vectors
    (:attr:`IndexLayout.term_vectors`): one per channel, each having the engine analyse the
    document's text fields from ``_source`` with that channel's analyzer (:func:`_reanalysed`
    turns the answers into the channel sub-fields' vectors)."""
    analyzers = channel_analyzers()
    return [{
        "_id": doc_id,
        "fields": list(layout.fields),
        "per_field_analyzer": {f: analyzers[ch] for f in layout.fields},
        "term_statistics": False,
        "field_statistics": False,
        "positions": False,
        "offsets": False,
        "payloads": False,
    } for ch in channels]


def _reanalysed(layout: IndexLayout, channels: Sequence[str],
                answers: Sequence[Mapping[str, Any]]) -> dict[str, FieldVector]:
    """One candidate's vectors from its :func:`_reanalysed_docs` answers (in channel order):
    each text field's channel sub-field, and the combined field's as their sum, which is what
    ``copy_to`` indexes (each field a value of its own, so no token pair spans two fields)."""
    out: dict[str, FieldVector] = {}
    for ch, ans in zip(channels, answers, strict=True):
        tvs = ans.get("term_vectors") or {}
        got = {f: _field_vector(tvs[f]) for f in layout.fields if (tvs.get(f) or {}).get("terms")}
        if ch in layout.field_channels:  # a text field has a sub-field of its own only for these
            for f, vec in got.items():
                out[layout.subfield(f, ch)] = vec
        if got:
            out[layout.subfield(layout.combined, ch)] = sum_vectors(list(got.values()))
    return out


def _sum_stats(answers: Sequence[Mapping[str, Any]], subfield: str) -> FieldStats:
    doc_count = sum_ttf = 0
    df: dict[str, int] = {}
    for ans in answers:
        tv = (ans.get("term_vectors") or {}).get(subfield)
        if not tv:
            continue
        fs = tv.get("field_statistics") or {}
        doc_count += int(fs.get("doc_count", 0))
        sum_ttf += int(fs.get("sum_ttf", 0))
        for term, info in (tv.get("terms") or {}).items():
            df[term] = df.get(term, 0) + int(info.get("doc_freq") or 0)
    return FieldStats(doc_count=doc_count, sum_ttf=sum_ttf, df=df)


@dataclass
class FetchResult:
    """What one fetch brought back: candidate vectors and per-subfield statistics."""

    candidates: CandidateVectors
    stats: dict[str, FieldStats]
    requests: int


def fetch_raw(
    engine: Engine,
    index: str,
    layout: IndexLayout,
    query: Mapping[str, QueryChannel],
    ids: Sequence[str],
    *,
    fields: Sequence[str],
    routing: ShardRouting | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    stats_query: Mapping[str, QueryChannel] | None = None,
    field_channels: Mapping[str, Sequence[str]] | None = None,
) -> FetchResult:
    """Candidate term vectors and summed per-shard statistics, in as few requests as possible
    (with a shard-copy preference, the statistics take one request per shard, sent together).

    Args:
        fields: the (text or combined) fields whose channel sub-fields are read.
        stats_query: the channels and terms to fetch statistics for (default: all of
            ``query``; empty: none, e.g. when they are cached).
        field_channels: the channels of the candidates' vectors per field (default: every
            channel of ``query`` in each of ``fields``), for reading fields in different
            channels with one request.
    """
    return run(fetch_raw_plan(index, layout, query, ids, fields=fields, routing=routing or ShardRouting(engine, index),
                              batch_size=batch_size, stats_query=stats_query, field_channels=field_channels,
                              copy_preference=engine.options.preference is not None), engine)


def fetch_raw_plan(
    index: str,
    layout: IndexLayout,
    query: Mapping[str, QueryChannel],
    ids: Sequence[str],
    *,
    fields: Sequence[str],
    routing: ShardRouting,
    batch_size: int = DEFAULT_BATCH_SIZE,
    stats_query: Mapping[str, QueryChannel] | None = None,
    copy_preference: bool = False,
    field_channels: Mapping[str, Sequence[str]] | None = None,
) -> Plan[FetchResult]:
    """:func:`fetch_raw` as a plan (:mod:`esbridge.engine.plan`).

    Args:
        copy_preference: the connection sends a shard-copy preference; for an index with
            replicas the statistics then go as one ``_termvectors`` request per shard, so that
            each carries it (see the module's notes).
    """
    if batch_size < 1:
        raise ConfigurationError(f"batch_size must be >= 1, got {batch_size}")
    pairs = [(f, ch) for f in fields for ch in query] if field_channels is None else \
        [(f, ch) for f, chs in field_channels.items() for ch in chs]
    wanted = {layout.subfield(f, ch): layout.indexed(f, ch) for f, ch in pairs}
    subfields = list(dict.fromkeys(sf for sfs in wanted.values() for sf in sfs))
    positions = any(sf in layout.positions for sf in subfields)
    stat_fields = list(dict.fromkeys([*fields, layout.combined]))
    stats_query = query if stats_query is None else stats_query
    stats_docs = _stats_docs(layout, stats_query, stat_fields, (yield from routing.routings_plan())) \
        if stats_query else []
    vectors: list[dict[str, FieldVector]] = []
    found: list[bool] = []
    versions: list[tuple[int, int] | None] = []
    stats_answers: list[Mapping[str, Any]] = []
    requests = 0
    if stats_docs and copy_preference and routing.replicated:
        stats_answers = yield from _shard_statistics_plan(index, stats_docs)
        requests += len(stats_docs)
        stats_docs = []
    n_stats = len(stats_docs)
    chunks = [list(ids[i:i + batch_size]) for i in range(0, len(ids), batch_size)] or [[]]
    stored = layout.term_vectors and (not ids or (yield from routing.stores_term_vectors_plan()))
    # without stored term vectors, each candidate is asked once per channel, its text analysed again
    channels = list(dict.fromkeys(ch for _, ch in pairs))
    per_doc = 1 if stored else len(channels)
    for n, chunk in enumerate(chunks):
        if stored:
            docs = [_candidate_doc(i, subfields, positions) for i in chunk]
        else:
            docs = [d for i in chunk for d in _reanalysed_docs(i, layout, channels)]
        if n == 0:
            docs = stats_docs + docs
        if not docs:
            continue
        resp = yield Call("POST", f"/{path_segment(index, patterns=True)}/_mtermvectors", body={"docs": docs},
                          context=f"fetching term vectors from {index!r}")
        requests += 1
        answers = resp["docs"]
        if n == 0 and n_stats:
            stats_answers = answers[:n_stats]
            answers = answers[n_stats:]
        if len(answers) != per_doc * len(chunk):
            raise EngineError(f"_mtermvectors on {index!r} answered {len(answers)} documents for the "
                              f"{per_doc * len(chunk)} requested", index=index)
        for k, doc_id in enumerate(chunk):
            mine = answers[k * per_doc:(k + 1) * per_doc]
            ans = next((a for a in mine if "error" in a), mine[0])
            if "error" in ans:
                raise EngineError(
                    f"term vectors of document {doc_id!r} in {index!r} failed: {ans['error']}",
                    index=index, body=ans,
                )
            ok = bool(ans.get("found"))
            found.append(ok)
            versions.append((int(ans.get("_version", 0)), 0) if ok else None)
            if stored:
                got = {sf: _field_vector(tv) for sf, tv in (ans.get("term_vectors") or {}).items()}
            else:
                got = _reanalysed(layout, channels, mine)
            vectors.append({key: sum_vectors([got.get(sf, EMPTY_VECTOR) for sf in sfs])
                            for key, sfs in wanted.items() if any(sf in got for sf in sfs)})
    for ans in stats_answers:
        if "error" in ans:
            # summing the other shards' statistics would score against part of the index
            err = ans["error"] if isinstance(ans["error"], Mapping) else {"reason": ans["error"]}
            raise EngineError(
                f"index-wide statistics of {index!r} could not be read from every shard "
                f"({err.get('type', 'error')}: {' '.join(str(err.get('reason', '')).split())}); "
                "retry when every shard has an active copy (GET _cluster/health)",
                index=index, body=ans,
            )
    stat_wanted = _engine_fields(layout, stat_fields, stats_query)
    summed = {sf: _sum_stats(stats_answers, sf) for sfs in stat_wanted.values() for sf in sfs}
    stats = {key: merge_stats([summed[sf] for sf in sfs]) for key, sfs in stat_wanted.items()}
    cands = CandidateVectors(ids=tuple(ids), vectors=tuple(vectors), found=tuple(found),
                             versions=tuple(versions))
    return FetchResult(candidates=cands, stats=stats, requests=requests)


def _field_vector(tv: Mapping[str, Any]) -> FieldVector:
    """One field's term vector from the engine's answer; with positions, its length is the
    number of distinct positions (tokens stacked at one position count once, as in Lucene's
    length norm)."""
    terms = tv.get("terms") or {}
    freqs = {t: int(v["term_freq"]) for t, v in terms.items()}
    seen = {tok.get("position") for v in terms.values() for tok in (v.get("tokens") or ())}
    seen.discard(None)
    return FieldVector(freqs, length=len(seen) if seen else None)


def _field_arrays(cands: CandidateVectors, subfield: str, terms: Sequence[str],
                  stats: FieldStats) -> tuple[FieldArrays, np.ndarray]:
    """The field's arrays for ``terms``, and each candidate's number of distinct terms in it."""
    n = len(cands.ids)
    matrix = cands.matrices.get(subfield)
    if matrix is not None and len(matrix.rows) == n and matrix.terms == tuple(terms) \
            and len(set(terms)) == len(terms) and np.array_equal(matrix.rows, np.arange(n)):
        # every candidate read as a matrix of exactly these terms (the engine plugin's answer)
        return (FieldArrays(tf=np.array(matrix.tf, dtype=np.float64),
                            doc_len=np.array(matrix.length, dtype=np.float64), avgdl=stats.avgdl),
                np.array(matrix.distinct, dtype=np.float64))
    tf = np.zeros((n, len(terms)), dtype=np.float64)
    column: dict[str, int] = {}
    for j, t in enumerate(terms):
        column.setdefault(t, j)
    wanted = column.keys()
    lengths = [0] * n
    distinct = [0] * n
    rows: list[int] = []
    cols: list[int] = []
    vals: list[int] = []
    # a candidate holds few of the query's terms: intersect (in C) and touch only those
    # (candidates read as matrices, e.g. through the engine plugin, have no vectors at all)
    for i, vec in enumerate(cands.vectors if any(cands.vectors) else ()):
        fv = vec.get(subfield)
        if fv is not None:
            lengths[i] = fv.length
            distinct[i] = len(fv)
            for t in fv.keys() & wanted:
                rows.append(i)
                cols.append(column[t])
                vals.append(fv[t])
    if rows:
        tf[rows, cols] = vals
    doc_len = np.array(lengths, dtype=np.float64)
    unique = np.array(distinct, dtype=np.float64)
    if matrix is not None and len(matrix.rows):
        at = {t: k for k, t in enumerate(matrix.terms)}
        src = np.array([at.get(t, -1) for t in column], dtype=np.int64)
        dst = np.array(list(column.values()), dtype=np.int64)
        have = src >= 0
        tf[np.ix_(matrix.rows, dst[have])] = matrix.tf[:, src[have]]
        doc_len[matrix.rows] = matrix.length
        unique[matrix.rows] = matrix.distinct
    for j, t in enumerate(terms):  # a term given twice fills both its columns
        if column[t] != j:
            tf[:, j] = tf[:, column[t]]
    return FieldArrays(tf=tf, doc_len=doc_len, avgdl=stats.avgdl), unique


def build_input(
    result: FetchResult,
    layout: IndexLayout,
    query: Mapping[str, QueryChannel],
    *,
    fields: Sequence[str],
    field_weights: Mapping[str, float] | None = None,
    entropy: Mapping[str, Mapping[str, float]] | None = None,
    distinct: bool = True,
) -> ScoringInput:
    """Per-channel arrays for the scorers from a :func:`fetch_raw` result.

    With ``fields == (layout.combined,)`` the channel arrays are the combined
    field's.  With the text fields, ``tf`` and ``doc_len`` are the BM25F
    pseudo-frequency and pseudo-length ``sum_f w_f * x_f``; ``df`` and ``N``
    always come from the combined field.  ``distinct=False``: no scorer reads the candidates'
    distinct terms (:attr:`~esbridge.scoring.registry.Scorer.needs_distinct`), which over several
    fields are then not counted (``unique_terms`` is ``None``).
    """
    weights = {f: float((field_weights or {}).get(f, 1.0)) for f in fields}
    channels: dict[str, ChannelArrays] = {}
    for ch, qc in query.items():
        combined_sf = layout.subfield(layout.combined, ch)
        read = {f: _field_arrays(result.candidates, layout.subfield(f, ch), qc.terms,
                                 result.stats[layout.subfield(f, ch)]) for f in fields}
        per_field = {f: arrays for f, (arrays, _) in read.items()}
        comb_stats = result.stats.get(combined_sf) or result.stats[layout.subfield(fields[0], ch)]
        n_docs = comb_stats.doc_count
        if tuple(fields) == (layout.combined,):
            only = per_field[layout.combined]
            tf, doc_len, avgdl = only.tf, only.doc_len, only.avgdl
            text_fields: dict[str, FieldArrays] = {}
        else:
            tf = sum((weights[f] * per_field[f].tf for f in fields),
                     np.zeros((len(result.candidates.ids), len(qc.terms))))
            doc_len = sum((weights[f] * per_field[f].doc_len for f in fields), np.zeros(len(result.candidates.ids)))
            total = sum(weights[f] * result.stats[layout.subfield(f, ch)].sum_ttf for f in fields)
            avgdl = total / n_docs if n_docs else 0.0
            text_fields = per_field
        sfs = [layout.subfield(f, ch) for f in fields]
        unique: np.ndarray | None
        if len(sfs) == 1:
            unique = read[fields[0]][1]
        elif not distinct:  # no scorer of these inputs reads it
            unique = None
        else:
            if any(sf in result.candidates.matrices for sf in sfs):
                raise ValueError("the distinct terms of several fields need their whole vectors, "
                                 "not those read for one query's terms")
            unique = np.array([float(len(set().union(*(vec.get(sf, {}) for sf in sfs))))
                               for vec in result.candidates.vectors], dtype=np.float64)
        ent = None
        if entropy is not None and ch in entropy:
            ent = np.array([float(entropy[ch].get(t, 0.0)) for t in qc.terms], dtype=np.float64)
        channels[ch] = ChannelArrays(
            terms=qc.terms,
            qtf=np.asarray(qc.qtf, dtype=np.float64),
            df=np.array([float(comb_stats.df.get(t, 0)) for t in qc.terms], dtype=np.float64),
            n_docs=n_docs,
            tf=tf,
            doc_len=doc_len,
            avgdl=avgdl,
            fields=text_fields,
            unique_terms=unique,
            entropy=ent,
        )
    return ScoringInput(channels=channels)
