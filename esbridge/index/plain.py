"""Your own index: an index whose text fields have no esbridge channel sub-fields.

esbridge reads such a *plain* index as it is (:func:`open_layout`):

* its text fields are found in the mapping (or named by the caller); the ``base``
  channel of each is the field itself, analysed by the field's own analyzer, and
  query text is analysed by the fields' search analyzer in the engine (``_analyze``);
* term vectors come from ``_mtermvectors``, which reads stored ones where the field
  has them and otherwise computes them from ``_source``;
* index-wide statistics come, as for an esbridge index, from one artificial document
  per shard, summed over the shards;
* the combined all-fields field is *virtual*: a candidate's term frequencies are added
  up over the text fields and the statistics merged the way Lucene's
  ``combined_fields`` query merges them (the largest ``df`` and document count of the
  fields, the summed total term frequency); with one text field it is that field.

Scorers that read only the ``base`` channel work on it; the others need esbridge's
channel sub-fields, which :func:`add_channels` adds in place (analysers, mapping, then
an ``_update_by_query`` that re-indexes every document from its ``_source``).
"""

from __future__ import annotations

import copy
import fnmatch
import logging
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from esbridge.engine.calls import check_index_name, path_segment
from esbridge.engine.client import Engine
from esbridge.engine.plan import Call, Plan, run
from esbridge.errors import ConfigurationError, EngineError, EngineUnavailableError, UnsupportedEngineError
from esbridge.index.definitions import (
    _FIELD_PATH,
    DEFAULT_COMBINED,
    IndexLayout,
    layout_from_meta,
    load_mapping_file,
    sequence_of_fields,
)

log = logging.getLogger(__name__)

__all__ = [
    "AddChannelsReport",
    "TextField",
    "add_channels",
    "channel_mapping_update",
    "missing_channels_message",
    "open_layout",
    "plain_layout",
    "text_fields",
]

#: Field types whose text esbridge can score (the others are not analysed into terms).
_TEXT_TYPES = ("text",)


@dataclass(frozen=True)
class TextField:
    """What the mapping says of one text field.

    Attributes:
        path: the field's full name (``title``, ``meta.title``, ``title.english``).
        analyzer: the analyzer it is indexed with (``standard`` where the mapping names
            none and the index defines no ``default``).
        search_analyzer: the analyzer a ``match`` query on it uses.
        custom: the analyzer is one the index defines (it may put several tokens at one
            position, which Lucene's length norm does not count).
        stored_vectors: term vectors are stored (``term_vector`` other than ``no``).
        parent: for a multi-field, the field whose value it indexes.
        copy_target: other fields copy their values into it (``copy_to``): it is not in
            ``_source``, so its term vectors exist only where they are stored.
        indexed: the field is searchable (``index`` is not ``false``).
    """

    path: str
    analyzer: str
    search_analyzer: str
    custom: bool = False
    stored_vectors: bool = False
    parent: str | None = None
    copy_target: bool = False
    indexed: bool = True


def _copy_targets(props: Mapping[str, Any], prefix: str, out: set[str]) -> None:
    for name, spec in props.items():
        if not isinstance(spec, Mapping):
            continue
        targets = spec.get("copy_to")
        for t in [targets] if isinstance(targets, str) else (targets or []):
            out.add(str(t))
        if isinstance(spec.get("properties"), Mapping):
            _copy_targets(spec["properties"], f"{prefix}{name}.", out)


def text_fields(mapping: Mapping[str, Any], custom_analyzers: Collection[str] = ()) -> dict[str, TextField]:
    """Every text field of one index's mapping (``mappings`` of ``GET /<index>/_mapping``),
    with its analyzers, in mapping order; fields of ``nested`` objects are left out (each
    nested object is a document of its own to Lucene).

    Args:
        custom_analyzers: the names of the analyzers the index's settings define.
    """
    custom = set(custom_analyzers)
    default_index = "default" if "default" in custom else "standard"
    default_search = "default_search" if "default_search" in custom else default_index
    targets: set[str] = set()
    _copy_targets(mapping.get("properties") or {}, "", targets)
    out: dict[str, TextField] = {}

    def field(path: str, spec: Mapping[str, Any], parent: str | None) -> TextField:
        analyzer = str(spec.get("analyzer") or default_index)
        search = str(spec.get("search_analyzer") or spec.get("analyzer") or default_search)
        return TextField(path=path, analyzer=analyzer, search_analyzer=search, custom=analyzer in custom,
                         stored_vectors=str(spec.get("term_vector", "no")) != "no", parent=parent,
                         copy_target=path in targets, indexed=spec.get("index", True) not in (False, "false"))

    def walk(props: Mapping[str, Any], prefix: str) -> None:
        for name, spec in props.items():
            if not isinstance(spec, Mapping):
                continue
            path = f"{prefix}{name}"
            kind = spec.get("type", "object" if "properties" in spec else None)
            if kind in _TEXT_TYPES:
                out[path] = field(path, spec, None)
            for sub, sub_spec in (spec.get("fields") or {}).items():
                if isinstance(sub_spec, Mapping) and sub_spec.get("type") in _TEXT_TYPES:
                    out[f"{path}.{sub}"] = field(f"{path}.{sub}", sub_spec, path)
            if kind == "object" and isinstance(spec.get("properties"), Mapping):
                walk(spec["properties"], f"{path}.")

    walk(mapping.get("properties") or {}, "")
    return out


def _source_problem(mapping: Mapping[str, Any], path: str) -> str | None:
    """Why the value of ``path`` is not in ``_source`` (``None`` if it is)."""
    src = mapping.get("_source") or {}
    if src.get("enabled", True) in (False, "false"):
        return "_source is disabled"
    parts = path.split(".")
    prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for pattern in src.get("excludes") or ():
        if any(fnmatch.fnmatchcase(p, str(pattern)) for p in prefixes):
            return f"_source excludes it ({pattern!r})"
    includes = list(src.get("includes") or ())
    if includes and not any(fnmatch.fnmatchcase(p, str(pat)) or str(pat).startswith(path + ".")
                            for p in prefixes for pat in includes):
        return f"_source includes only {includes}"
    return None


def _readable(mapping: Mapping[str, Any], f: TextField, fields: Mapping[str, TextField]) -> str | None:
    """Why esbridge cannot read term vectors of ``f`` (``None`` if it can)."""
    if not f.indexed:
        return "it is not indexed (index: false)"
    if f.stored_vectors:
        return None
    if f.copy_target:
        return "it is filled by copy_to, so its value is not in _source, and it stores no term vectors"
    problem = _source_problem(mapping, f.parent or f.path)
    if problem is not None:
        return f"{problem} and it stores no term vectors"
    return None


def _describe(fields: Sequence[TextField]) -> str:
    return ", ".join(f"{f.path} ({f.search_analyzer})" for f in fields)


def plain_layout(index: str, mappings: Sequence[Mapping[str, Any]], custom_analyzers: Collection[str] = (),
                 fields: str | Sequence[str] | None = None) -> IndexLayout:
    """The :class:`IndexLayout` of a plain index from its mapping(s).

    Without ``fields``, the text fields that are neither multi-fields nor ``copy_to``
    targets and whose term vectors esbridge can read; with ``fields``, those (any text
    field, a multi-field too).  Every chosen field must be analysed the same way (the
    query is analysed once).

    Args:
        index: the index's name, for messages.
        mappings: the ``mappings`` of every concrete index the name stands for (an alias may
            name several); the chosen fields must be defined alike in all.
        custom_analyzers: the analyzers the index's settings define.
        fields: the text fields to read, or ``None`` to find them.

    Raises:
        ConfigurationError: a named field is not a text field, cannot be read, the fields
            are analysed differently, or the index has no readable text field; the message
            says what to do.
    """
    if not mappings:
        raise ConfigurationError(f"index {index!r} has no mapping")
    per_index = [text_fields(m, custom_analyzers) for m in mappings]
    found = per_index[0]
    hint = (f"add esbridge's channel sub-fields with `esbridge index --add-channels --index {index}` "
            "(esbridge.index.add_channels)")
    if fields is None:
        chosen: list[TextField] = []
        for f in found.values():
            if f.parent is None and not f.copy_target and _readable(mappings[0], f, found) is None:
                chosen.append(f)
        if not chosen:
            listed = "; ".join(f"{f.path}: {_readable(mappings[0], f, found) or 'a multi-field or copy_to target'}"
                               for f in found.values()) or "none"
            raise ConfigurationError(
                f"index {index!r} has no text field esbridge can read term vectors of (its text fields: {listed}); "
                "name fields that store term vectors, or index the documents with `esbridge index`")
        groups: dict[tuple[str, str], list[TextField]] = {}
        for f in chosen:
            groups.setdefault((f.analyzer, f.search_analyzer), []).append(f)
        if len(groups) > 1:
            listed = "; ".join(f"{_describe(g)}" for g in groups.values())
            raise ConfigurationError(
                f"the text fields of index {index!r} are analysed differently ({listed}), and esbridge scores one "
                f"analysis of the query: name fields that share one analyzer, e.g. fields=[{chosen[0].path!r}] or "
                f"--fields {chosen[0].path}, or {hint}")
    else:
        names = sequence_of_fields(fields)
        chosen = []
        for name in names:
            got = found.get(name)
            if got is None:
                raise ConfigurationError(
                    f"{name!r} is not a text field of index {index!r}; its text fields are "
                    f"{', '.join(found) or 'none'}")
            problem = _readable(mappings[0], got, found)
            if problem is not None:
                raise ConfigurationError(f"field {name!r} of index {index!r} cannot be scored: {problem}; "
                                         f"store term vectors for it, or {hint}")
            chosen.append(got)
        kinds = {(f.analyzer, f.search_analyzer) for f in chosen}
        if len(kinds) > 1:
            raise ConfigurationError(
                f"fields {', '.join(names)} of index {index!r} are analysed differently ({_describe(chosen)}), and "
                f"esbridge scores one analysis of the query: name fields that share one analyzer, or {hint}")
    for other, mapping in zip(per_index[1:], mappings[1:]):
        for f in chosen:
            g = other.get(f.path)
            if g is None or (g.analyzer, g.search_analyzer, g.parent) != (f.analyzer, f.search_analyzer, f.parent):
                raise ConfigurationError(
                    f"field {f.path!r} is not mapped alike in every index {index!r} names; score one index at a time")
            problem = _readable(mapping, g, other)
            if problem is not None:
                raise ConfigurationError(f"field {f.path!r} cannot be scored in every index {index!r} names: "
                                         f"{problem}")
    paths = tuple(f.path for f in chosen)
    combined = DEFAULT_COMBINED if DEFAULT_COMBINED not in paths else f"{DEFAULT_COMBINED}_virtual"
    return IndexLayout(
        fields=paths, combined=combined, channels=("base",), plain=True,
        search_analyzer=chosen[0].search_analyzer,
        doc_paths=tuple((f.path, f.parent) for f in chosen if f.parent is not None),
        positions=tuple(f.path for f in chosen if f.custom),
    )


@dataclass(frozen=True)
class _IndexSpec:
    """What esbridge reads of one concrete index: its mapping and its analysis settings."""

    mapping: dict[str, Any]
    analysis: dict[str, Any]


def _indices_plan(index: str) -> Plan[dict[str, _IndexSpec]]:
    """Per concrete index that ``index`` names, its mapping and ``index.analysis`` settings
    (empty where it defines none), in one ``GET /<index>``."""
    resp = yield Call("GET", f"/{path_segment(index, patterns=True)}", context=f"reading the mapping of {index!r}")
    return {str(name): _IndexSpec(
        mapping=dict((spec or {}).get("mappings") or {}),
        analysis=dict((((spec or {}).get("settings") or {}).get("index") or {}).get("analysis") or {}))
        for name, spec in resp.items()}


def open_layout(engine: Engine, index: str, fields: str | Sequence[str] | None = None) -> IndexLayout:
    """The layout esbridge reads ``index`` with (:func:`open_layout_plan`)."""
    return run(open_layout_plan(index, fields), engine)


def open_layout_plan(index: str, fields: str | Sequence[str] | None = None) -> Plan[IndexLayout]:
    """The layout esbridge reads ``index`` with: the one recorded in its mapping for an index
    created by esbridge, else that of a plain index (:func:`plain_layout`).

    Args:
        fields: the text fields to read (default: all of an esbridge index's, or those
            :func:`plain_layout` finds); for an esbridge index, some of its text fields.

    Raises:
        ConfigurationError: see :func:`plain_layout`; for an esbridge index, a field that
            is not one of its text fields.
    """
    specs = yield from _indices_plan(index)
    meta = next((spec.mapping["_meta"]["esbridge"] for spec in specs.values()
                 if (spec.mapping.get("_meta") or {}).get("esbridge")), None)
    if meta:
        layout = layout_from_meta(meta)
        if fields is None:
            return layout
        names = sequence_of_fields(fields)
        unknown = [f for f in names if f not in layout.fields]
        if unknown:
            raise ConfigurationError(f"{', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} not "
                                     f"a text field of index {index!r}; its text fields are {', '.join(layout.fields)}")
        return replace(layout, fields=names)
    custom: set[str] = set()
    for spec in specs.values():
        custom |= set((spec.analysis.get("analyzer") or {}).keys())
    mappings = [spec.mapping for spec in specs.values()]
    return plain_layout(index, mappings, custom, fields)


def _and(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def missing_channels_message(scorer: str, missing: Sequence[str], index: str, layout: IndexLayout) -> str:
    """One line: ``scorer`` reads ``missing`` channels that ``index`` lacks, and how to add them."""
    s = "s" if len(missing) > 1 else ""
    if layout.plain:
        fields = _and([repr(f) for f in layout.fields])
        kind = (f"a plain index: its only channel, base, is the text field{'s' if len(layout.fields) > 1 else ''} "
                f"{fields} as analysed by {layout.search_analyzer!r}")
    else:
        kind = f"it has {_and(list(layout.channels))}"
    return (f"scorer {scorer!r} needs the {_and(list(missing))} channel{s}, which index {index!r} does not have "
            f"({kind}); add {'them' if s else 'it'} with `esbridge index --add-channels --index {index}` "
            f"(esbridge.index.add_channels), or use a scorer that reads only {_and(list(layout.channels))} "
            "(e.g. bm25, bmx)")


# ---- adding esbridge's channels to an existing index ---------------------------------------

def _channel_template() -> dict[str, Any]:
    """esbridge's text field with its sub-fields (``mappings/text_field.json``)."""
    template: dict[str, Any] = load_mapping_file("text_field.json")
    return template


def _same_subfield(have: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    """An existing sub-field is esbridge's (a resumed ``add_channels``): same type, analyzer and
    term vectors."""
    return all(str(have.get(k, "")) == str(want.get(k, "")) for k in ("type", "analyzer", "term_vector"))


def _lookup(props: Mapping[str, Any], path: str) -> Mapping[str, Any] | None:
    parts = path.split(".")
    spec: Any = {"properties": props}
    for part in parts:
        spec = ((spec or {}).get("properties") or {}).get(part)
        if spec is None:
            return None
    return spec if isinstance(spec, Mapping) else None


def channel_mapping_update(index: str, mapping: Mapping[str, Any], fields: Sequence[str],
                           combined: str = DEFAULT_COMBINED) -> dict[str, Any]:
    """The put-mapping body that gives ``fields`` of an existing index esbridge's channel
    sub-fields and copies them into the combined field ``combined``.

    Each field is sent with its mapping as it is plus the sub-fields and the ``copy_to``
    (a text field takes new multi-fields and ``copy_to`` targets; its other parameters
    cannot change); the combined field is esbridge's (``mappings/text_field.json``).

    Raises:
        ConfigurationError: a field is missing, not ``text``, a multi-field, or already has a
            different sub-field of one of esbridge's names; ``combined`` is another field.
    """
    props = mapping.get("properties") or {}
    template = _channel_template()
    subs: dict[str, Any] = template["fields"]
    out: dict[str, Any] = {}
    known = text_fields(mapping)
    for name in fields:
        if not _FIELD_PATH.match(name):
            raise ConfigurationError(f"field {name!r} of index {index!r}: esbridge's channels go on fields whose "
                                     "names hold letters, digits, _ and - (objects joined by dots)")
        spec = _lookup(props, name)
        if spec is None:
            parent = known.get(name)
            if parent is not None and parent.parent is not None:
                raise ConfigurationError(f"{name!r} is a multi-field of {parent.parent!r} in index {index!r}; add "
                                         f"the channels to {parent.parent!r} instead")
            raise ConfigurationError(f"index {index!r} has no field {name!r}; its text fields are "
                                     f"{', '.join(f for f, t in known.items() if t.parent is None) or 'none'}")
        kind = spec.get("type", "object" if "properties" in spec else None)
        if kind not in _TEXT_TYPES:
            raise ConfigurationError(f"field {name!r} of index {index!r} is of type {kind!r}, not text: esbridge's "
                                     "channels analyse text; choose text fields with --field")
        if known[name].copy_target:
            raise ConfigurationError(f"field {name!r} of index {index!r} is filled by copy_to, which does not copy "
                                     "on into esbridge's combined field; add the channels to the fields copied "
                                     "into it")
        new = copy.deepcopy(dict(spec))
        existing = dict(new.get("fields") or {})
        for sub, want in subs.items():
            have = existing.get(sub)
            if have is not None and not _same_subfield(have, want):
                raise ConfigurationError(f"field {name!r} of index {index!r} already has a sub-field {sub!r} "
                                         f"({have.get('type')}, analyzer {have.get('analyzer', 'default')!r}) that is "
                                         "not esbridge's; rename it to add esbridge's channels")
            # one there already stays as it is (an index option such as positions cannot change)
            existing[sub] = copy.deepcopy(dict(have) if have is not None else want)
        new["fields"] = existing
        targets = new.get("copy_to")
        targets = [targets] if isinstance(targets, str) else list(targets or [])
        if combined not in targets:
            targets.append(combined)
        new["copy_to"] = targets
        node = out
        parts = name.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {"properties": {}})["properties"]
        node[parts[-1]] = new
    if combined in props:
        have_combined = props[combined]
        if not (have_combined.get("type") == "text" and _same_subfield(have_combined, template)
                and all(_same_subfield((have_combined.get("fields") or {}).get(s) or {}, w) for s, w in subs.items())):
            raise ConfigurationError(f"index {index!r} already has a field {combined!r} that is not esbridge's "
                                     "combined field; esbridge needs that name for it")
    else:
        out[combined] = copy.deepcopy(template)
    return {"properties": out}


@dataclass(frozen=True)
class AddChannelsReport:
    """What :func:`add_channels` did.

    Attributes:
        index: the index.
        fields: the text fields that got the channel sub-fields.
        documents: documents in the index, before and after (checked equal; every document
            holding a field holds its sub-fields too, also checked).
        updated: documents re-indexed by ``_update_by_query``.
        version_conflicts: documents written by someone else while they were re-indexed
            (already indexed with the new sub-fields, so nothing is missing).
        analysis_added: esbridge's analyzers were added (the index was closed for it).
        seconds: how long it took.
    """

    index: str
    fields: tuple[str, ...]
    documents: int
    updated: int
    version_conflicts: int
    analysis_added: bool
    seconds: float

    def summary(self) -> str:
        conflicts = (f"; {self.version_conflicts} written meanwhile by others (indexed with the channels "
                     "already)") if self.version_conflicts else ""
        return (f"esbridge's channels added to {', '.join(self.fields)} of {self.index!r}: {self.updated} of "
                f"{self.documents} documents re-indexed in place in {self.seconds:.1f}s{conflicts}; document count "
                f"unchanged ({self.documents})")


def _concrete(engine: Engine, index: str) -> tuple[str, _IndexSpec]:
    """The one concrete index ``index`` names (an alias or a pattern naming one), with its mapping
    and analysis settings."""
    check_index_name(index)
    specs = run(_indices_plan(index), engine)
    names = sorted(specs)
    if len(names) != 1:
        raise ConfigurationError(f"{index!r} names {len(names)} indices ({', '.join(names[:5])}); add the channels "
                                 "to one index at a time")
    return names[0], specs[names[0]]


def _analysis_update(index: str, analysis: Mapping[str, Any]) -> dict[str, Any]:
    """esbridge's analyzers and filters the index lacks (empty if it has them all).

    Raises:
        ConfigurationError: the index defines one of esbridge's names differently.
    """
    want = load_mapping_file("analysis.json")
    add: dict[str, Any] = {}
    for kind in ("filter", "analyzer"):
        have = analysis.get(kind) or {}
        for name, spec in want.get(kind, {}).items():
            if name not in have:
                add.setdefault(kind, {})[name] = spec
            elif _normalised(have[name]) != _normalised(spec):
                raise ConfigurationError(f"index {index!r} defines the {kind} {name!r} differently from esbridge's "
                                         f"(mappings/analysis.json); esbridge's channels need that name")
    return add


def _normalised(value: Any) -> Any:
    """Settings as the engine returns them: every scalar a string."""
    if isinstance(value, Mapping):
        return {str(k): _normalised(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalised(v) for v in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _add_analysis(engine: Engine, index: str, add: Mapping[str, Any]) -> None:
    """Add analysis settings: they change only on a closed index, so close, update, reopen."""
    where = path_segment(index)
    engine.request("POST", f"/{where}/_close", context=f"closing {index!r} to add esbridge's analyzers")
    try:
        engine.request("PUT", f"/{where}/_settings", body={"analysis": dict(add)},
                       context=f"adding esbridge's analyzers to {index!r}")
    finally:
        engine.request("POST", f"/{where}/_open", params={"wait_for_active_shards": "1"},
                       context=f"reopening {index!r}")
        engine.request("GET", f"/_cluster/health/{where}", params={"wait_for_status": "yellow", "timeout": "60s"},
                       context=f"waiting for {index!r} to reopen")


def _require_update_by_query(engine: Engine, concrete: str, index: str) -> None:
    """Check, before anything changes, that the engine re-indexes in place: an
    ``_update_by_query`` of no document.

    Raises:
        UnsupportedEngineError: the engine has no ``_update_by_query`` (Elasticsearch's and
            OpenSearch's ``reindex`` module; the minimal Elasticsearch distribution lacks it).
        EngineError: the engine refused it otherwise (e.g. the user lacks the privilege).
    """
    try:
        engine.request("POST", f"/{path_segment(concrete)}/_update_by_query", params={"conflicts": "proceed"},
                       body={"query": {"match_none": {}}},
                       context=f"checking that {index!r} can be re-indexed in place (_update_by_query)")
    except EngineError as err:
        if isinstance(err, EngineUnavailableError) or err.status not in (400, 404, 405) or \
                "no handler found" not in str(err.reason or ""):
            raise
        raise UnsupportedEngineError(
            f"{engine.info.label} has no _update_by_query (its reindex module is not installed), which adding "
            f"esbridge's channels needs to re-index the documents of {index!r} in place; nothing was changed. "
            "Use an engine with the reindex module, or index the documents again with `esbridge index`") from err


def _wait_for_task(engine: Engine, index: str, task: str, *, progress: bool, poll_interval: float) -> dict[str, Any]:
    """Poll the ``_update_by_query`` task until it ends, with a progress bar; its final answer."""
    from tqdm import tqdm

    bar = tqdm(total=None, desc=f"re-indexing {index}", unit="doc", disable=not progress, file=sys.stderr)
    wait = min(0.05, poll_interval)
    try:
        while True:
            resp: dict[str, Any] = engine.request("GET", f"/_tasks/{task}",
                                                  context=f"following the re-indexing of {index!r}")
            status = (resp.get("task") or {}).get("status") or {}
            total = int(status.get("total") or 0)
            if total and bar.total != total:
                bar.total = total
            done = sum(int(status.get(k) or 0) for k in ("updated", "noops", "version_conflicts", "created"))
            bar.n = done
            bar.refresh()
            if resp.get("completed"):
                return resp
            time.sleep(wait)
            wait = min(poll_interval, wait * 2)  # a small index is done at once, a large one polled calmly
    except KeyboardInterrupt:
        try:
            engine.request("POST", f"/_tasks/{task}/_cancel", context="cancelling the re-indexing")
        finally:
            log.warning("re-indexing of %r cancelled; the index is unchanged for esbridge (still plain); "
                        "run the same command again to add the channels", index)
        raise
    finally:
        bar.close()


def add_channels(engine: Engine, index: str, fields: str | Sequence[str] | None = None, *, progress: bool = False,
                 poll_interval: float = 1.0) -> AddChannelsReport:
    """Give an existing index esbridge's channel sub-fields, in place.

    1. esbridge's analyzers are added to the index's settings (analysis settings change only
       on a closed index: it is closed for a moment, then reopened);
    2. each text field gets the channel sub-fields ``<field>.base``, ``.prefix``, ``.bigram``,
       ``.micro`` (term vectors stored) and ``.length``, and is copied into the combined
       field ``esb_all`` (put-mapping; the field keeps its own analyzer and parameters);
    3. every document is re-indexed from its ``_source`` (``_update_by_query``, followed with
       a progress bar), so the new sub-fields fill;
    4. the document count before and after, and the documents holding each field and its
       ``base`` sub-field, are checked equal; then the layout is recorded in ``_meta.esbridge``,
       and from then on the index is an esbridge index for every scorer.

    Documents written while it runs are indexed with the new sub-fields already.  Interrupted
    or failed, the index stays a plain index for esbridge; running it again resumes.  Until
    Lucene merges segments away, the index's own fields count each re-indexed document's old
    copy in their statistics (as after any update); esbridge's sub-fields never saw those.

    Args:
        fields: the text fields (default: those :func:`plain_layout` would find, whatever
            their analyzers).
        progress: a progress bar on standard error.
        poll_interval: the most seconds between two looks at the re-indexing task (the first
            looks come sooner).

    Everything it needs is checked before anything changes, ``_update_by_query`` too (an
    ``_update_by_query`` of no document).

    Raises:
        ConfigurationError: the index already has esbridge's layout, has ``_source``
            disabled or filtered (re-indexing from it would lose data), a field is not text,
            or a name esbridge needs is taken.
        UnsupportedEngineError: the engine has no ``_update_by_query`` (its ``reindex``
            module is not installed); nothing was changed.
        EngineError: the engine refused a step, a document failed to re-index, or the
            checks found a difference.
    """
    started = time.perf_counter()
    concrete, spec = _concrete(engine, index)
    mapping = spec.mapping
    if (mapping.get("_meta") or {}).get("esbridge"):
        meta = mapping["_meta"]["esbridge"]
        raise ConfigurationError(f"index {index!r} already has esbridge's channels (text fields "
                                 f"{', '.join(meta.get('fields') or [])}); nothing to add")
    src = mapping.get("_source") or {}
    if src.get("enabled", True) in (False, "false") or src.get("includes") or src.get("excludes"):
        what = "disabled" if src.get("enabled", True) in (False, "false") else "filtered (includes/excludes)"
        raise ConfigurationError(
            f"index {index!r} has _source {what}, so its documents cannot be re-indexed in place without losing "
            "data; index them again from your own copy with `esbridge index`")
    if fields is None:
        found = text_fields(mapping)
        names = tuple(f.path for f in found.values() if f.parent is None and not f.copy_target and f.indexed)
        if not names:
            raise ConfigurationError(f"index {index!r} has no text field to add esbridge's channels to")
    else:
        names = sequence_of_fields(fields)
    # validates the names; every channel goes on every field (the sub-fields mapped below)
    layout = IndexLayout(fields=names, field_channels=IndexLayout().channels, base_subfield=True)
    body = channel_mapping_update(index, mapping, layout.fields, layout.combined)
    add = _analysis_update(index, spec.analysis)
    _require_update_by_query(engine, concrete, index)
    if add:
        _add_analysis(engine, concrete, add)
    where = path_segment(concrete)
    engine.request("PUT", f"/{where}/_mapping", body=body, context=f"adding esbridge's channel sub-fields to {index!r}")
    engine.refresh(concrete)
    before = engine.count(concrete)
    resp = engine.request("POST", f"/{where}/_update_by_query",
                          params={"wait_for_completion": "false", "conflicts": "proceed", "refresh": "true",
                                  "slices": "auto"},
                          body={"query": {"match_all": {}}},
                          context=f"re-indexing {index!r} so the channel sub-fields fill")
    task = str(resp.get("task") or "")
    if not task:
        raise EngineError(f"the engine started no re-indexing task for {index!r} (answer: {resp})", index=index)
    done = _wait_for_task(engine, index, task, progress=progress, poll_interval=poll_interval)
    if done.get("error"):
        err = done["error"]
        raise EngineError(f"re-indexing {index!r} failed: {err.get('type')}: {err.get('reason')}; run the same "
                          "command again to resume", index=index, body=err)
    result = done.get("response") or {}
    failures = result.get("failures") or []
    if failures:
        first = failures[0]
        cause = first.get("cause") or {}
        raise EngineError(f"{len(failures)} document(s) of {index!r} failed to re-index, e.g. {first.get('id')!r}: "
                          f"{cause.get('type')}: {cause.get('reason')}; fix them and run the same command again",
                          index=index, body=failures[:5])
    engine.refresh(concrete)
    after = engine.count(concrete)
    if after != before:
        raise EngineError(f"index {index!r} held {before} documents before re-indexing and {after} after; were "
                          "documents added or deleted meanwhile? Run the same command again to check", index=index)
    for name in layout.fields:
        # every document with a term in the field has its exact token count in <field>.length
        has_field = engine.count(concrete, {"exists": {"field": name}})
        has_length = engine.count(concrete, {"exists": {"field": f"{name}.length"}})
        if has_length < has_field:
            raise EngineError(f"after re-indexing, {has_field} documents of {index!r} hold {name!r} but only "
                              f"{has_length} its channel sub-fields; run the same command again", index=index)
    meta = dict(mapping.get("_meta") or {})
    meta["esbridge"] = {**layout.to_meta(), "channels_added": True}
    engine.request("PUT", f"/{where}/_mapping", body={"_meta": meta},
                   context=f"recording esbridge's layout in {index!r}")
    return AddChannelsReport(
        index=index, fields=layout.fields, documents=after, updated=int(result.get("updated") or 0),
        version_conflicts=int(result.get("version_conflicts") or 0), analysis_added=bool(add),
        seconds=time.perf_counter() - started)
