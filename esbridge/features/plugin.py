"""Candidates' features read inside the engine, by esbridge's engine plugin.

Where every node of the cluster runs the ``esbridge-features`` plugin (built from the Java
sources in ``esbridge/nodes/plugins/``: :mod:`esbridge.nodes.features_plugin`), a candidate's
features come back with a search instead of ``_mtermvectors``: the search (the first stage
itself, or one that names the candidates with an ``ids`` filter) carries the query's terms per
sub-field in its ``esbridge_features`` extension; the plugin's fetch sub-phase adds to each hit,
per sub-field, its length, its number of distinct terms and the frequency of each term: the
frequencies from the postings, the length and distinct terms from the document's stored term
vector, read once and kept while its segment is open.  Only those numbers cross the network, not
each candidate's whole vector.

The same search brings the terms' index-wide statistics: the plugin adds to the first hit of each
shard the statistics its searcher holds for them.  With one shard they are the shard's own; with
several, the search runs as ``dfs_query_then_fetch`` and carries one optional ``term`` clause per
term, so that the engine's DFS phase gathers each term's statistics from every shard and hands
each shard the sums.  esbridge checks that every shard reported the same numbers.

Nothing about scoring runs in the engine: the numbers are those the ``_mtermvectors`` path reads
(:func:`esbridge.features.termvectors.fetch_raw`), and both feed the same Python scorers.  The
plugin serves esbridge's own indices, each of whose sub-fields is one field of the index; a plain
index (whose combined field adds several up) is read as before.  It is found once per connection
(``GET /_nodes/plugins``); a cluster without it (a managed service that installs no plugins) is
read as before, as is every cluster when the environment sets ``ESBRIDGE_FEATURES_PLUGIN=off``
(or a reranker is given ``features="termvectors"``).
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from esbridge.engine.calls import ids_search_plan
from esbridge.engine.client import EngineBase
from esbridge.engine.plan import Plan, gather
from esbridge.engine.plugins import PLUGIN_NAME, on_every_node_plan
from esbridge.errors import ConfigurationError, EngineError
from esbridge.features.termvectors import (
    CandidateVectors,
    FetchResult,
    FieldStats,
    QueryChannel,
    TermMatrix,
    merge_stats,
)
from esbridge.index.definitions import IndexLayout

__all__ = ["EXTENSION", "FEATURE_SOURCES", "LIMIT_SETTINGS", "Carried", "PluginAnalysis", "analysing_ext",
           "analysis_from", "candidates_from", "carried_features", "check_feature_source", "features_ext",
           "features_plugin_plan", "features_tag", "fetch_with_plugin_plan", "limit_error", "within_limits_plan"]

#: The search extension the plugin answers.
EXTENSION = "esbridge_features"
_FEATURES = "_esbridge_features"
_STATS = "_esbridge_stats"
_QUERY = "_esbridge_query"
#: Candidates per search through the plugin (the searches of one fetch are sent together).
BATCH_SIZE = 500
#: The node settings that bound the plugin's extension per request (terms, fields, characters
#: analysed), which its refusal of a request beyond one names.
LIMIT_SETTINGS = ("esbridge.features.max_terms", "esbridge.features.max_fields",
                  "esbridge.features.max_analyze_chars")

T = TypeVar("T")


#: How candidates' features are read: ``"auto"`` (through the plugin where every node runs it),
#: ``"plugin"`` (through it, an error where a node lacks it) or ``"termvectors"`` (never through it).
FEATURE_SOURCES = ("auto", "plugin", "termvectors")


def check_feature_source(value: str) -> str:
    """``value`` if it is one of :data:`FEATURE_SOURCES`, else a :class:`ConfigurationError`."""
    if value not in FEATURE_SOURCES:
        raise ConfigurationError(f"features must be one of {', '.join(FEATURE_SOURCES)}, got {value!r}")
    return value


def features_plugin_plan(engine: EngineBase, source: str = "auto") -> Plan[bool]:
    """Whether candidates' features are read through the plugin: never with ``source``
    ``"termvectors"``; with ``"auto"``, where every node of ``engine``'s cluster runs it (asked
    once per connection; not where listing the plugins is not allowed) unless the environment
    sets ``ESBRIDGE_FEATURES_PLUGIN=off``; with ``"plugin"`` (or ``ESBRIDGE_FEATURES_PLUGIN=on``)
    always, a node without it being an error.

    Raises:
        ConfigurationError: ``"plugin"`` asked for and some node lacks it.
    """
    env = os.environ.get("ESBRIDGE_FEATURES_PLUGIN", "").lower()
    if source == "termvectors" or (source == "auto" and env in ("off", "0", "false", "no")):
        return False
    cached = yield from on_every_node_plan(engine)
    if not cached and (source == "plugin" or env == "on"):
        asked = "features='plugin'" if source == "plugin" else "ESBRIDGE_FEATURES_PLUGIN=on"
        raise ConfigurationError(
            f"features read through esbridge's engine plugin were asked for ({asked}), but not every node "
            f"of the cluster runs {PLUGIN_NAME} (GET _nodes/plugins); install it (esbridge plugin build) "
            "or read them with _mtermvectors (features='auto' or 'termvectors')")
    return cached


def limit_error(err: EngineError, index: str) -> EngineError | None:
    """What to tell a caller whose search the plugin refused for going beyond one of its limits
    (:data:`LIMIT_SETTINGS`: a very long query, many augmentation variants or fields), or ``None``
    where ``err`` is not such a refusal."""
    reasons = [str(r.get("reason") or "") for r in err.root_cause if isinstance(r, Mapping)]
    reasons += [err.reason or "", str(err)]
    found = next(((r, s) for r in reasons for s in LIMIT_SETTINGS if s in r), None)
    if err.status != 400 or found is None:
        return None
    reason, setting = found
    return EngineError(
        f"searching {index!r}: the esbridge-features plugin refused to read this query's features: {reason}. "
        "Shorten the query (fewer distinct terms, augmentation variants or fields), raise the node setting "
        f"{setting} on every node of the cluster, or read the features with _mtermvectors (features='termvectors', "
        "--features termvectors, or ESBRIDGE_FEATURES_PLUGIN=off)",
        status=err.status, error_type=err.error_type, reason=reason, root_cause=err.root_cause, index=index,
        body=err.body)


def within_limits_plan(plan: Plan[T], index: str) -> Plan[T]:
    """``plan``, a search of ``index`` that carries the plugin's extension, its refusal for one of
    the plugin's limits made the error :func:`limit_error` says."""
    try:
        return (yield from plan)
    except EngineError as err:
        clear = limit_error(err, index)
        if clear is None:
            raise
        raise clear from err


def _groups(layout: IndexLayout, query: Mapping[str, QueryChannel],
            fields: Sequence[str]) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """``{key sub-field: (the index's field it is, the terms to count)}``.

    Raises:
        ConfigurationError: a key made of several fields of the index (a plain index's combined
            field), which the plugin does not add up.
    """
    out: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for f in fields:
        for ch, qc in query.items():
            key = layout.subfield(f, ch)
            members, terms = out.get(key, (layout.indexed(f, ch), ()))
            if len(members) != 1:
                raise ConfigurationError(f"{key!r} adds up the fields {list(members)}; the esbridge-features "
                                         "plugin reads one field a group (read it with _mtermvectors)")
            out[key] = (members, tuple(dict.fromkeys((*terms, *qc.terms))))
    return out


def _stats_fields(layout: IndexLayout, query: Mapping[str, QueryChannel],
                  fields: Sequence[str]) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """``({index field: terms}, {key sub-field: index fields})`` of the statistics to read."""
    terms: dict[str, tuple[str, ...]] = {}
    keys: dict[str, tuple[str, ...]] = {}
    for f in fields:
        for ch, qc in query.items():
            members = layout.indexed(f, ch)
            keys[layout.subfield(f, ch)] = members
            for sf in members:
                terms[sf] = tuple(dict.fromkeys((*terms.get(sf, ()), *qc.terms)))
    return terms, keys


def features_ext(layout: IndexLayout, query: Mapping[str, QueryChannel], fields: Sequence[str],
                 stats: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The search extension that asks for the features of ``query`` in ``fields`` (and for the
    statistics ``stats``, ``[{"field": ..., "terms": [...]}, ...]``)."""
    groups = _groups(layout, query, fields)
    asked = [{"fields": list(members), "terms": list(terms)} for members, terms in groups.values()]
    return {EXTENSION: {"groups": asked, "stats": list(stats), "tag": _tag(groups)}}


def features_tag(layout: IndexLayout, query: Mapping[str, QueryChannel], fields: Sequence[str]) -> str:
    """What the plugin returns with each hit's features to say which terms and fields they are of."""
    return _features_tag(layout, tuple(query.items()), tuple(fields))


@functools.lru_cache(maxsize=1024)
def _features_tag(layout: IndexLayout, query: tuple[tuple[str, QueryChannel], ...], fields: tuple[str, ...]) -> str:
    """:func:`features_tag`, kept for the queries of the moment (a query's tag is asked for twice)."""
    return _tag(_groups(layout, dict(query), fields))


def _tag(groups: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]]) -> str:
    rows = [[list(members), list(terms)] for members, terms in groups.values()]
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode()).hexdigest()[:20]


def analysing_ext(layout: IndexLayout, text: str, analysed: Sequence[str], counted: Sequence[str]) -> dict[str, Any]:
    """The search extension that has the plugin analyse ``text`` in the ``analysed`` channels of
    the combined field (each sub-field with its own index analyzer, as ``_termvectors`` analyses an
    artificial document), return the tokens and the terms' statistics with the first hit of each
    shard, and add to each hit the features of the ``counted`` channels (some of ``analysed``), in
    that order.  Its answer: :func:`analysis_from`, then :func:`carried_features`."""
    combined = layout.combined
    return {EXTENSION: {"analyze": {"text": text,
                                    "fields": [layout.subfield(combined, ch) for ch in analysed],
                                    "count": [layout.subfield(combined, ch) for ch in counted]},
                        "tag": "analyze"}}


@dataclass(frozen=True)
class PluginAnalysis:
    """A query text as the plugin analysed it in the combined field (:func:`analysing_ext`).

    Attributes:
        query: per channel its terms in position order (tokens at one position in term order:
            the order :func:`~esbridge.features.termvectors.analyze_with_stats_plan` gives).
        stats: per sub-field of the combined field, the statistics of those terms as the shard's
            searcher holds them (index-wide only for an index of one shard).
        in_order: whether the plugin counted the features in the order of ``query``'s terms (the
            order esbridge reads them in); if not, they are read again by id.
    """

    query: dict[str, QueryChannel]
    stats: dict[str, FieldStats]
    in_order: bool


def analysis_from(index: str, layout: IndexLayout, analysed: Sequence[str],
                  hits: Sequence[dict[str, Any]]) -> PluginAnalysis | None:
    """What the plugin answered to :func:`analysing_ext` for the ``analysed`` channels, taken out of
    the first hit that carries it (``None`` where no hit does: the search found nothing).

    Raises:
        EngineError: the answer does not have the shape asked for (another plugin version).
    """
    for hit in hits:
        fields = hit.get("fields")
        if not (isinstance(fields, dict) and _QUERY in fields):
            continue
        tokens = fields.pop(_QUERY)[0]
        stats = (fields.pop(_STATS, None) or [None])[0]
        if not fields:
            del hit["fields"]
        if not (isinstance(tokens, list) and isinstance(stats, list) and len(tokens) == len(stats) == len(analysed)):
            raise EngineError(f"the esbridge-features plugin answered an analysis of another shape for {index!r}; "
                              "is it the version this esbridge builds (esbridge plugin build)?", index=index)
        query: dict[str, QueryChannel] = {}
        out_stats: dict[str, FieldStats] = {}
        in_order = True
        try:
            for ch, pair, values in zip(analysed, tokens, stats, strict=True):
                positions, terms = pair
                tokens_at = [(int(p), str(t)) for p, t in zip(positions, terms, strict=True)]
                ordered = sorted(tokens_at)
                in_order = in_order and ordered == tokens_at
                query[ch] = QueryChannel.from_tokens(t for _, t in ordered)
                counted = list(dict.fromkeys(t for _, t in tokens_at))  # the plugin's order of the terms
                out_stats[layout.subfield(layout.combined, ch)] = _field_stats(values, counted)
        except (ValueError, TypeError, IndexError):
            raise EngineError(f"the esbridge-features plugin answered an analysis of another shape for {index!r}; "
                              "is it the version this esbridge builds (esbridge plugin build)?", index=index) from None
        return PluginAnalysis(query=query, stats=out_stats, in_order=in_order)
    return None


def _field_stats(values: Sequence[Any], terms: Sequence[str]) -> FieldStats:
    """One field's statistics as the plugin answers them: ``[doc_count, sum_ttf, df of each term...]``."""
    return FieldStats(doc_count=int(values[0]), sum_ttf=int(values[1]),
                      df={t: int(v) for t, v in zip(terms, values[2:], strict=True)})


class Carried(dict[str, str]):
    """Features the plugin added to some hits: ``{_id: packed features}`` (per group its length,
    distinct terms and each term's frequency, as little-endian 16- or 32-bit integers in base64), with
    the tag of the request they answer (:func:`features_tag`)."""

    __slots__ = ("tag",)

    def __init__(self, tag: str | None) -> None:
        super().__init__()
        self.tag = tag


def carried_features(hits: Sequence[dict[str, Any]]) -> Carried:
    """The features the plugin added to ``hits``, taken out of the hits, which are then as the
    search would have returned them without it.

    Raises:
        EngineError: a hit's features are not ``[tag, packed]`` (another version of the plugin).
    """
    out = Carried(None)
    for hit in hits:
        fields = hit.get("fields")
        if not isinstance(fields, dict):
            continue
        got = fields.pop(_FEATURES, None)
        if got is not None:
            if _STATS in fields:
                del fields[_STATS]
            if not fields:
                del hit["fields"]
            if got and got[0]:
                if len(got[0]) != 2 or not isinstance(got[0][1], str):
                    raise EngineError(f"the esbridge-features plugin answered features of another format for "
                                      f"document {hit.get('_id')!r} of {hit.get('_index')!r}; install the version "
                                      "this esbridge builds (esbridge plugin build)", index=hit.get("_index"))
                tag, packed = got[0]
                if out.tag not in (None, tag):
                    return Carried(None)  # hits of several searches: none is used
                out.tag = tag
                out[str(hit["_id"])] = packed
    return out


def candidates_from(index: str, layout: IndexLayout, query: Mapping[str, QueryChannel], fields: Sequence[str],
                    ids: Sequence[str], by_id: Mapping[str, str]) -> CandidateVectors:
    """``ids`` as :class:`CandidateVectors` of :class:`TermMatrix` rows, from what the plugin
    returned for them (``by_id``: :func:`carried_features`, per document its packed features: per
    group its length, distinct terms and each term's frequency); an id it did not return is not
    found.

    Raises:
        EngineError: the plugin's answer does not have the shape asked for (another plugin
            version), or a field is indexed without term frequencies or term vectors.
    """
    groups = _groups(layout, query, fields)
    width = sum(len(terms) + 2 for _, terms in groups.values())
    found = [i in by_id for i in ids]
    present = [i for i, ok in zip(ids, found, strict=True) if ok]
    try:
        packed = [binascii.a2b_base64(by_id[doc_id]) for doc_id in present]
    except (binascii.Error, ValueError, TypeError):
        packed = [_decoded(by_id[doc_id]) for doc_id in present]
    sizes = set(map(len, packed))
    if not sizes <= {2 * width, 4 * width}:
        doc_id = next(d for d, raw in zip(present, packed, strict=True) if len(raw) not in (2 * width, 4 * width))
        raise EngineError(f"the esbridge-features plugin answered features of another shape for document "
                          f"{doc_id!r} of {index!r}; is it the version this esbridge builds?", index=index)
    arr = _unpack(packed, width, narrow=sizes <= {2 * width})
    rows = np.flatnonzero(found)
    matrices: dict[str, TermMatrix] = {}
    at = 0
    for key, (_, terms) in groups.items():
        length = arr[:, at]
        if (length < 0).any():
            raise EngineError(f"{key!r} in {index!r} is indexed without term frequencies or stores no term "
                              "vectors, which the esbridge-features plugin reads", index=index)
        matrices[key] = TermMatrix(rows=rows, terms=terms, tf=arr[:, at + 2:at + 2 + len(terms)], length=length,
                                   distinct=arr[:, at + 1])
        at += len(terms) + 2
    return CandidateVectors(ids=tuple(ids), vectors=tuple({} for _ in ids), found=tuple(found), matrices=matrices)


def _decoded(text: Any) -> bytes:
    """``text`` decoded from base64; nothing where it is not base64."""
    try:
        return binascii.a2b_base64(text)
    except (binascii.Error, ValueError, TypeError):
        return b""


def _unpack(packed: Sequence[bytes], width: int, *, narrow: bool) -> np.ndarray:
    """One row per document of its ``width`` values, each document's packed as little-endian
    16-bit integers (``2 * width`` bytes: every value fits) or 32-bit ones (``4 * width``);
    ``narrow``: every document's are 16-bit."""
    if narrow:
        return np.frombuffer(b"".join(packed), dtype="<i2").reshape(len(packed), width).astype(np.float64)
    arr = np.zeros((len(packed), width), dtype=np.float64)
    for r, raw in enumerate(packed):
        arr[r] = np.frombuffer(raw, dtype="<i2" if len(raw) == 2 * width else "<i4")
    return arr


def fetch_with_plugin_plan(
    index: str,
    layout: IndexLayout,
    query: Mapping[str, QueryChannel],
    ids: Sequence[str],
    *,
    fields: Sequence[str],
    stats_query: Mapping[str, QueryChannel],
    stat_fields: Sequence[str],
    shards: int,
    batch_size: int = BATCH_SIZE,
) -> Plan[FetchResult | None]:
    """The features of ``ids`` as :func:`~esbridge.features.termvectors.fetch_raw` reads them,
    through the plugin: the candidates as :class:`TermMatrix` rows of the query's terms (their
    ``vectors[i]`` empty), the statistics of ``stats_query``'s terms in ``stat_fields``.

    Returns ``None`` when the statistics were asked for and no search returned a hit to carry
    them (no candidate was found): the caller reads them the other way.

    Args:
        shards: the index's shard count; with more than one the statistics are gathered by the
            engine's DFS phase.
    """
    stat_terms, stat_keys = _stats_fields(layout, stats_query, stat_fields) if stats_query else ({}, {})
    ext_stats = [{"field": sf, "terms": list(terms)} for sf, terms in stat_terms.items()]
    dfs = shards > 1 and bool(ext_stats)
    chunks = [list(ids[i:i + batch_size]) for i in range(0, len(ids), batch_size)] or [[]]

    def one(chunk: list[str], with_stats: bool) -> Plan[Any]:
        query_clause: dict[str, Any] = {"filter": [{"ids": {"values": chunk}}]}
        if with_stats and dfs:
            # optional clauses: they change no hit, and make the DFS phase gather these terms' statistics
            query_clause["should"] = [{"term": {sf: {"value": t}}} for sf, terms in stat_terms.items() for t in terms]
        body = {"size": len(chunk), "query": {"bool": query_clause}, "_source": False, "track_total_hits": False,
                "ext": features_ext(layout, query, fields, ext_stats if with_stats else ())}
        params = {"search_type": "dfs_query_then_fetch"} if with_stats and dfs else None
        return (yield from within_limits_plan(ids_search_plan(index, body, layout.id_values, params=params), index))

    answers = yield gather(*(one(chunk, n == 0 and bool(ext_stats)) for n, chunk in enumerate(chunks)))
    shard_stats: list[list[Any]] = []
    by_id: dict[str, str] = {}
    for resp in answers:
        hits = resp["hits"]["hits"]
        shard_stats += [h["fields"][_STATS][0] for h in hits if _STATS in (h.get("fields") or {})]
        got = carried_features(hits)
        if len(got) != len(hits):
            raise EngineError(f"the esbridge-features plugin answered no features for some documents of {index!r}; "
                              "is it installed on every node?", index=index)
        by_id.update(got)
    if ext_stats and not shard_stats:
        return None
    if any(s != shard_stats[0] for s in shard_stats[1:]):
        raise EngineError(f"the shards of {index!r} reported different statistics for the same terms: the "
                          "DFS phase did not gather them; read them without the plugin "
                          "(ESBRIDGE_FEATURES_PLUGIN=off)", index=index)
    stats: dict[str, FieldStats] = {}
    if ext_stats:
        per_field = {}
        for (sf, terms), values in zip(stat_terms.items(), shard_stats[0], strict=True):
            per_field[sf] = _field_stats(values, terms)
        stats = {key: merge_stats([per_field[sf] for sf in members]) for key, members in stat_keys.items()}
    cands = candidates_from(index, layout, query, fields, ids, by_id)
    return FetchResult(candidates=cands, stats=stats, requests=len(chunks))
