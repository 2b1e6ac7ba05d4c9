"""Ingestion: documents from JSONL (or a BEIR corpus) into an esbridge index.

Streaming, with bounded memory: documents are read one line at a time and sent
in bulk requests of at most ``chunk_docs`` documents or ``chunk_bytes`` bytes.
Every input line ends either indexed or in the report with its line number, id
and reason; nothing is dropped silently.  Documents rejected by the engine with
429 are sent again with backoff.  Re-running is idempotent: the document id is
the engine's ``_id``, so a second run overwrites rather than duplicates.
After the run the index is refreshed and the number of the input's ids present
in the index is checked against the number indexed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from esbridge.engine.calls import check_index_name, ndjson_lines, path_segment
from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError, EngineUnavailableError, EsbridgeError, IngestError
from esbridge.index.definitions import IndexLayout, VectorField, create_index, layout_from_meta, read_layout

#: Documents above this many bytes of JSON are reported, not sent.
DEFAULT_MAX_DOC_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class DocumentFailure:
    """One document that was not indexed, and why."""

    line: int | None
    doc_id: str | None
    reason: str

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else "input"
        ident = f" (id {self.doc_id!r})" if self.doc_id is not None else ""
        return f"{where}{ident}: {self.reason}"


@dataclass(frozen=True)
class SourceDocument:
    """A parsed input document (or the reason it could not be parsed)."""

    line: int
    doc_id: str | None
    source: dict[str, Any] | None
    error: str | None = None
    size: int = 0


@dataclass
class IngestReport:
    """The outcome of an ingestion run."""

    index: str
    read: int = 0
    indexed: int = 0
    failures: list[DocumentFailure] = field(default_factory=list)
    present: int | None = None
    seconds: float = 0.0
    #: documents whose id an earlier document of the same input already had (the later one
    #: replaced the earlier, as the engine does); they are counted in ``indexed``.
    duplicates: list[DocumentFailure] = field(default_factory=list)
    #: the index the documents were written to: ``index``, or with ``replace`` the new index
    #: that replaced it.
    target: str = ""
    #: what became of the index besides the documents (replaced, or left unchanged), if anything.
    note: str | None = None
    #: whether the index stores term vectors (:attr:`esbridge.index.IndexLayout.term_vectors`).
    term_vectors: bool = True
    #: the documents indexed were deleted with the new index that was to replace ``index``, which
    #: is unchanged (``note`` says why).
    discarded: bool = False

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        text = (f"{self.indexed} of {self.read} documents indexed into {self.target or self.index!r} "
                f"in {self.seconds:.1f}s")
        if self.failures:
            text += f"; {len(self.failures)} failed"
        if self.duplicates:
            text += (f"; {len(self.duplicates)} repeated an earlier id and replaced it, so "
                     f"{self.indexed - len(self.duplicates)} distinct documents were written")
        if self.note:
            text += f"; {self.note}"
        return text


def read_jsonl(
    path: str | os.PathLike[str],
    *,
    id_field: str = "_id",
    fields: Sequence[str] = ("title", "text"),
    max_doc_bytes: int = DEFAULT_MAX_DOC_BYTES,
) -> Iterator[SourceDocument]:
    """Parse a JSONL file one line at a time.

    Each line becomes a :class:`SourceDocument`; a malformed line, a missing or
    non-scalar id, a text field that is not a string, or a document above
    ``max_doc_bytes`` gives one with ``error`` set instead of raising.  Blank
    lines are skipped.  Fields other than ``fields`` are not indexed.

    The file is checked when this is called, before any document is yielded (so before
    an index is created or replaced for it): it must be a readable file holding at least
    one document that can be indexed.  Only the lines up to that first good document are
    read for the check (and read again when iterating); a file holding none is read once.

    Raises:
        ConfigurationError: the file does not exist, cannot be read, or holds no document
            that can be indexed (the message gives the first line's reason).
    """
    p = Path(path)
    shown = str(p)
    seen = 0
    first: SourceDocument | None = None  # the first line that cannot be indexed
    try:
        if not p.exists():
            raise ConfigurationError(f"input file {shown!r} does not exist")
        if not p.is_file():
            raise ConfigurationError(f"input file {shown!r} is not a regular file")
        with open(p, "rb") as f:
            for line_no, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                seen += 1
                doc = parse_document(raw, line_no, id_field=id_field, fields=fields, max_doc_bytes=max_doc_bytes)
                if doc.error is None:
                    break
                if first is None:
                    first = doc
            else:
                if first is None:
                    raise ConfigurationError(f"input file {shown!r} holds no documents (it is empty)")
                lines = f"its {seen} lines" if seen > 1 else "its one line"
                raise ConfigurationError(f"input file {shown!r} holds no document that can be indexed (none of "
                                         f"{lines}); the first: "
                                         f"{DocumentFailure(first.line, first.doc_id, first.error or '')}")
    except OSError as err:
        raise ConfigurationError(f"input file {shown!r} cannot be read: {err.strerror or err}") from err
    return _read_lines(p, id_field=id_field, fields=fields, max_doc_bytes=max_doc_bytes)


def count_lines(path: str | os.PathLike[str]) -> int:
    """The lines of a file (a last one without a newline counts too), read in blocks: a
    progress bar's total, cheap next to parsing them."""
    lines, last = 0, b"\n"
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n")


def _read_lines(p: Path, *, id_field: str, fields: Sequence[str], max_doc_bytes: int) -> Iterator[SourceDocument]:
    with open(p, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if raw.strip():
                yield parse_document(raw, line_no, id_field=id_field, fields=fields, max_doc_bytes=max_doc_bytes)


def parse_document(
    raw: bytes | str,
    line_no: int,
    *,
    id_field: str = "_id",
    fields: Sequence[str] = ("title", "text"),
    max_doc_bytes: int = DEFAULT_MAX_DOC_BYTES,
) -> SourceDocument:
    """Validate one JSON document for indexing (see :func:`read_jsonl`)."""
    size = len(raw)
    if size > max_doc_bytes:
        doc_id = _peek_id(raw, id_field)
        return SourceDocument(line_no, doc_id, None,
                              f"document is {size / 1e6:.1f} MB, above the limit of "
                              f"{max_doc_bytes / 1e6:.1f} MB (raise --max-doc-bytes to index it)", size)
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as err:
        return SourceDocument(line_no, None, None, f"malformed JSON: {err}", size)
    except RecursionError:
        return SourceDocument(line_no, None, None, "malformed JSON: nested too deeply to parse", size)
    return document_from_mapping(obj, line_no, id_field=id_field, fields=fields, size=size)


#: Keys of an input document that are not written to its ``_source``: the engine's metadata fields,
#: and the field esbridge writes each document's id to.
_NOT_IN_SOURCE = frozenset({"_id", "_index", "_source", "_routing", "_version", "_seq_no", "_primary_term",
                            "_score", "_ignored", "_field_names", "_type", "esbridge_id"})


def document_from_mapping(
    obj: Any,
    line_no: int,
    *,
    id_field: str = "_id",
    fields: Sequence[str] = ("title", "text"),
    size: int = 0,
) -> SourceDocument:
    """Validate an already-parsed document (a mapping with an id and string text fields);
    ``line_no`` is its position in the input, used in reports."""
    if not isinstance(obj, Mapping):
        what = "a JSON object" if size else "a mapping (or a SourceDocument)"
        return SourceDocument(line_no, None, None, f"expected {what}, got {type(obj).__name__}", size)
    raw_id = obj.get(id_field)
    if raw_id is None or raw_id == "":
        return SourceDocument(line_no, None, None, missing_id(obj, id_field), size)
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
        return SourceDocument(line_no, None, None,
                              f"id field {id_field!r} must be a string or integer, "
                              f"got {type(raw_id).__name__}", size)
    doc_id = str(raw_id)
    if len(doc_id.encode("utf-8")) > 512:
        return SourceDocument(line_no, doc_id[:40] + "...", None,
                              "id is longer than 512 bytes, the engine's limit", size)
    # the fields esbridge does not score are kept as they are: the index maps them as the engine
    # would (dynamic mapping), so they filter, aggregate and sort
    source: dict[str, Any] = {k: v for k, v in obj.items() if k not in _NOT_IN_SOURCE and k != id_field
                              and k not in fields and v is not None}
    for name in fields:
        value = obj.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            return SourceDocument(line_no, doc_id, None,
                                  f"field {name!r} must be a string, got {type(value).__name__}", size)
        source[name] = value
    if id_field != "_id":
        source[id_field] = doc_id
    return SourceDocument(line_no, doc_id, source, None, size)


#: Field names that look like a document's id once lower-cased without ``_``, ``-`` or spaces
#: (``id``, ``_id``, ``ID``, ``docid``, ``doc_id``, ``DocID``, ``document-id``, ...).
_ID_LIKE = frozenset({"id", "docid", "documentid"})


def missing_id(obj: Mapping[str, Any], id_field: str) -> str:
    """The reason of a document without a value in ``id_field``: names the option and the parameter
    that choose the id field, and the document's field that looks like its id, if it has one."""
    text = f"missing id field {id_field!r}"
    for name, value in obj.items():
        usable = isinstance(value, (str, int)) and not isinstance(value, bool) and value != ""
        if usable and name != id_field and "".join(c for c in str(name).lower() if c not in "_- ") in _ID_LIKE:
            return (f"{text}; the document has {name!r}, which looks like its id: give --id-field {name} "
                    f"(Python: id_field={name!r})")
    return f"{text}; give --id-field NAME (Python: id_field=) to take each document's id from the field NAME"


def _peek_id(raw: bytes | str, id_field: str) -> str | None:
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    value = obj.get(id_field) if isinstance(obj, dict) else None
    return str(value) if isinstance(value, (str, int)) else None


def _chunks(docs: Iterable[SourceDocument | Mapping[str, Any]], chunk_docs: int,
            chunk_bytes: int, fields: Sequence[str], id_field: str) -> Iterator[list[SourceDocument]]:
    batch: list[SourceDocument] = []
    size = 0
    for position, doc in enumerate(docs, start=1):
        if not isinstance(doc, SourceDocument):
            doc = document_from_mapping(doc, position, fields=fields, id_field=id_field,
                                        size=len(json.dumps(doc, default=str)) if isinstance(doc, Mapping) else 0)
        batch.append(doc)
        size += doc.size
        if len(batch) >= chunk_docs or size >= chunk_bytes:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _send(engine: Engine, index: str, docs: Sequence[SourceDocument], *, max_retries: int,
          backoff: float, id_values: str | None = None) -> list[DocumentFailure]:
    """Index ``docs`` (``id_values``: the field their ids are written to as well); the failures."""
    pending = list(docs)
    failures: list[DocumentFailure] = []
    delay = backoff
    for attempt in range(max_retries + 1):
        lines: list[Mapping[str, Any]] = []
        for d in pending:
            lines.append({"index": {"_index": index, "_id": d.doc_id}})
            lines.append({**(d.source or {}), id_values: d.doc_id} if id_values else d.source or {})
        resp = engine.request("POST", "/_bulk", body=ndjson_lines(lines), ndjson=True,
                              context=f"bulk indexing into {index!r}")
        retry: list[SourceDocument] = []
        for doc, item in zip(pending, resp["items"]):
            result = item.get("index") or next(iter(item.values()))
            status = int(result.get("status", 500))
            if status < 300:
                continue
            err = result.get("error") or {}
            if status == 429 and attempt < max_retries:
                retry.append(doc)
                continue
            reason = f"{err.get('type', 'error')}: {err.get('reason', err)}"
            caused = err.get("caused_by") or {}
            if caused.get("reason"):
                reason += f" (caused by {caused.get('type')}: {caused['reason']})"
            failures.append(DocumentFailure(doc.line, doc.doc_id, f"rejected by the engine: {reason}"))
        if not retry:
            return failures
        pending = retry
        time.sleep(delay)
        delay = min(delay * 2, 30.0)
    return failures  # pragma: no cover


def count_present(engine: Engine, index: str, ids: Iterable[str], batch: int = 10_000) -> int:
    """How many of ``ids`` are documents of ``index``."""
    total = 0
    chunk: list[str] = []
    for doc_id in ids:
        chunk.append(doc_id)
        if len(chunk) >= batch:
            total += engine.count(index, {"ids": {"values": chunk}})
            chunk = []
    if chunk:
        total += engine.count(index, {"ids": {"values": chunk}})
    return total


def ingest(
    engine: Engine,
    index: str,
    docs: Iterable[SourceDocument | Mapping[str, Any]],
    *,
    layout: IndexLayout | None = None,
    create: bool = True,
    replace: bool = False,
    shards: int = 1,
    replicas: int = 0,
    bm25: tuple[float, float] | None = None,
    chunk_docs: int = 500,
    chunk_bytes: int = 8 * 1024 * 1024,
    max_retries: int = 5,
    backoff: float = 0.5,
    progress: bool = False,
    strict: bool = False,
    vector: VectorField | None = None,
    term_vectors: bool | None = None,
    document_vectors: Sequence[VectorField] = (),
    allow_partial: bool = False,
    total: int | None = None,
) -> IngestReport:
    """Index ``docs`` into ``index``, creating it with esbridge's mapping if needed.

    Args:
        docs: parsed documents (see :func:`read_jsonl`), or plain mappings with an ``_id``
            and the layout's text fields (validated the same way); failures are reported
            with their line (or position), id and reason, never raised one by one.
        layout: the text fields; for an existing index it must match the index's own.
        create: create the index if it does not exist.
        replace: the documents replace all that an existing ``index`` holds.  They are
            indexed into a new index (``<index>-<UTC time>``, with ``layout``), which takes
            the name ``index`` as an alias once they are all in, in one atomic change that
            also deletes the index replaced (its other aliases move to the new one).  Until
            then ``index`` keeps its old content; if indexing stops, or any document could
            not be indexed (unless ``allow_partial``), ``index`` is left unchanged and the new
            index deleted (where the engine can still be reached; the report's ``note`` says
            so and ``discarded`` is set).  An ``index`` that does not exist is created.
        shards: primary shards of an index created here.
        replicas: replicas of each shard of an index created here (on a cluster of several
            nodes, 1 keeps every document on two nodes).
        strict: raise :class:`IngestError` at the end if any document failed
            (what was indexed stays indexed).
        vector: when the index is created here, give it this dense-vector field (the
            engine's kNN search; the vectors are filled by
            :func:`esbridge.semantic.engine_vectors.open_vectors`).
        document_vectors: when the index is created here, these whole-document vector fields too
            (:func:`esbridge.index.document_vector_field`; filled by
            :func:`esbridge.semantic.engine_vectors.open_document_vectors`).
        term_vectors: whether an index created here stores term vectors (see
            :func:`esbridge.index.create_index`: by default none where every node runs esbridge's
            engine plugin).
        allow_partial: with ``replace``, replace ``index`` even when some documents could not
            be indexed (never when not one could): by default it is left unchanged then.
        total: how far the progress bar goes: the input file's lines (:func:`count_lines`) for
            documents read from it (the bar follows their line numbers); by default the number
            of ``docs`` where it has a length, else none.

    An index created here for documents of which not one could be indexed is deleted again
    (the report's ``note`` says so): no empty index is left behind.

    Returns:
        The report: counts, every failure with line, id and reason, and the number
        of input ids found in the index after a refresh.
    """
    if chunk_docs < 1 or chunk_bytes < 1:
        raise ConfigurationError("chunk_docs and chunk_bytes must be >= 1")
    check_index_name(index)
    if replace and not create:
        raise ConfigurationError("replace=True creates a new index for the documents; it cannot go with create=False")
    started = time.monotonic()
    target, replaced, created, written = _target_index(
        engine, index, layout, create=create, replace=replace,
        how={"shards": shards, "replicas": replicas, "bm25": bm25, "vector": vector, "term_vectors": term_vectors,
             "document_vectors": tuple(document_vectors)})
    fields, id_field, id_values = written.fields, written.id_field, written.id_values
    report = IngestReport(index=index, target=target, term_vectors=written.term_vectors)
    indexed_ids: set[str] = set()
    first_line: dict[str, int] = {}
    from tqdm import tqdm

    if total is None and isinstance(docs, Sized):
        total = len(docs)
    bar = tqdm(desc=f"indexing {index}", unit="doc", total=total, disable=not progress, file=sys.stderr)
    try:
        for batch in _chunks(docs, chunk_docs, chunk_bytes, fields, id_field):
            report.read += len(batch)
            good = _sendable(batch, report, first_line)
            if good:
                failed = _send(engine, target, good, max_retries=max_retries, backoff=backoff,
                               id_values=id_values if id_values != id_field else None)
                bad = {(f.line, f.doc_id) for f in failed}
                report.failures.extend(failed)
                for d in good:
                    if (d.line, d.doc_id) not in bad and d.doc_id is not None:
                        indexed_ids.add(d.doc_id)
                report.indexed += len(good) - len(failed)
            # the last line read (blank lines are none of the documents but count for the file's total)
            bar.update(max(batch[-1].line, bar.n + len(batch)) - bar.n)
        if total is not None and bar.n < total:
            bar.update(total - bar.n)  # blank lines at the end: the whole input was read
    except EsbridgeError as err:
        report.seconds = time.monotonic() - started
        raise IngestError(_stopped(engine, report, err, replaced=replaced is not None, created=created),
                          report.failures, report=report) from err
    except KeyboardInterrupt:
        if replaced is not None:
            _discard(engine, target)  # the index replaced is unchanged
        raise
    finally:
        bar.close()
    engine.refresh(target)
    report.present = count_present(engine, target, indexed_ids)
    report.seconds = time.monotonic() - started
    if report.present != len(indexed_ids):
        kept = ""
        if replaced is not None:
            kept = f"; {index!r} is unchanged" + ("" if _discard(engine, target) else
                                                  f", and the new index {target!r} is left: delete it")
        raise IngestError(
            f"after indexing, {report.present} of the {len(indexed_ids)} distinct indexed ids are in "
            f"{target!r}; documents were lost or deleted concurrently{kept}",
            report.failures,
        )
    if replaced is not None and (report.indexed == 0 or (report.failures and not allow_partial)):
        # the new index would hold only part of the input: the index it was to replace keeps its content
        engine.delete_index(target)
        report.discarded = True
        report.note = f"{index!r} is unchanged: " + (
            "not one document could be indexed, so the new index that was to replace it was deleted"
            if report.indexed == 0 else _partial(report))
    elif created and report.indexed == 0 and engine.count(target) == 0:
        engine.delete_index(target)
        report.note = f"not one document could be indexed, so the index {index!r} created for them was deleted"
    elif replaced is not None:
        report.note = _take_name(engine, index, replaced, target, report)
    if strict and report.failures:
        raise IngestError(
            f"{len(report.failures)} document(s) were not indexed into {index!r}; first: "
            f"{report.failures[0]}" + (f"; {report.note}" if report.discarded else ""), report.failures,
        )
    return report


def _target_index(engine: Engine, index: str, layout: IndexLayout | None, *, create: bool, replace: bool,
                  how: Mapping[str, Any]) -> tuple[str, tuple[str, dict[str, Any]] | None, bool, IndexLayout]:
    """Where :func:`ingest` writes: the index (created with ``how``'s settings where it does not exist,
    or a new one that replaces it), the index replaced at the end with its aliases (or ``None``),
    whether the target was created here, and its layout."""
    exists = engine.index_exists(index)
    if replace and exists:
        replaced = _named_index(engine, index)
        target = _replacement_name(engine, index)
        body = create_index(engine, target, layout, meta={"replaces": index}, **how)
        return target, replaced, True, layout_from_meta(body["mappings"]["_meta"]["esbridge"])
    if exists:
        existing = read_layout(engine, index)
        if layout is not None and (layout.fields, layout.combined, layout.id_field) != \
                (existing.fields, existing.combined, existing.id_field):
            raise ConfigurationError(
                f"index {index!r} exists with fields {list(existing.fields)}; "
                f"the input asks for {list(layout.fields)} — use another index name or the same fields"
            )
        return index, None, False, existing
    if not create:
        raise ConfigurationError(f"index {index!r} does not exist (and create=False)")
    body = create_index(engine, index, layout, **how)
    return index, None, True, layout_from_meta(body["mappings"]["_meta"]["esbridge"])


def _sendable(batch: Sequence[SourceDocument], report: IngestReport,
              first_line: dict[str, int]) -> list[SourceDocument]:
    """The documents of ``batch`` that can be sent; the others' failures, and repeated ids, go into
    ``report`` (``first_line``: the line each id was first read on)."""
    good = []
    for d in batch:
        if d.error is not None:
            report.failures.append(DocumentFailure(d.line, d.doc_id, d.error))
            continue
        if d.doc_id is not None:
            first = first_line.setdefault(d.doc_id, d.line)
            if first != d.line:
                report.duplicates.append(DocumentFailure(
                    d.line, d.doc_id, f"repeats the id of line {first}; this line replaced it"))
        good.append(d)
    return good


def _partial(report: IngestReport) -> str:
    """Why a replacement that indexed part of its input was not made, and how to make it."""
    return (f"{report.indexed} of the {report.read} documents read could be indexed ({len(report.failures)} failed), "
            "so the new index that was to replace it was deleted; run the command again with --allow-partial "
            "(Python: allow_partial=True) to replace it with the documents that could be indexed")


def _named_index(engine: Engine, index: str) -> tuple[str, dict[str, Any]]:
    """The one concrete index ``index`` names (itself, or the index of an alias), with its aliases.

    Raises:
        ConfigurationError: ``index`` is an alias of several indices.
    """
    resp = engine.request("GET", f"/{path_segment(index)}/_alias", context=f"reading which index {index!r} names")
    names = sorted(resp)
    if len(names) != 1:
        raise ConfigurationError(f"{index!r} is an alias of {len(names)} indices ({', '.join(names[:5])}); "
                                 "replace one index at a time")
    return names[0], dict((resp[names[0]] or {}).get("aliases") or {})


def _replacement_name(engine: Engine, index: str) -> str:
    """A free index name for the index that is to replace ``index``: ``<index>-<UTC time>``."""
    base = index.encode("utf-8")[:230].decode("utf-8", "ignore")
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
    name, n = f"{base}-{stamp}", 1
    while engine.index_exists(name):
        n += 1
        name = f"{base}-{stamp}-{n}"
    return name


def _discard(engine: Engine, index: str) -> bool:
    """Delete an index esbridge created for this run; whether it is gone."""
    try:
        engine.delete_index(index)
    except EsbridgeError:
        return False
    return True


def _stopped(engine: Engine, report: IngestReport, err: EsbridgeError, *, replaced: bool, created: bool) -> str:
    """The message of an ingestion that stopped part-way, saying what is where and how to finish."""
    index, target = report.index, report.target
    done = f"stopped after {report.indexed} of the {report.read} documents read so far were indexed: {err}"
    reachable = not isinstance(err, EngineUnavailableError)
    if replaced:
        left = (f"the new index {target!r} was deleted" if reachable and _discard(engine, target) else
                f"the partial new index {target!r} is left: delete it")
        return (f"indexing into {target!r}, the new index that was to replace {index!r}, {done}. {index!r} is "
                f"unchanged; {left}, and run the same command again to replace it")
    if created and report.indexed == 0 and reachable and _discard(engine, target):
        return (f"indexing into {index!r} {done}. Not one document was indexed, so the index created for them was "
                "deleted; run the same command again")
    return (f"indexing into {index!r} {done}. Nothing indexed is lost; re-run the same command to finish "
            "(documents are written by id, so a re-run does not duplicate them)")


def _take_name(engine: Engine, index: str, replaced: tuple[str, Mapping[str, Any]], target: str,
               report: IngestReport) -> str:
    """Give ``target`` the name ``index`` (an alias) and the other aliases of the index it replaces,
    and delete that index, in one atomic ``_aliases`` request; what was done, in words."""
    old, aliases = replaced
    actions: list[dict[str, Any]] = [{"add": {"index": target, "alias": index}}]
    actions += [{"add": {**dict(spec or {}), "index": target, "alias": alias}}
                for alias, spec in aliases.items() if alias != index]
    actions.append({"remove_index": {"index": old}})
    try:
        engine.request("POST", "/_aliases", body={"actions": actions},
                       context=f"replacing {old!r} with {target!r} as {index!r}")
    except EsbridgeError as err:
        # an answer lost after the engine applied the change (a retry then finds the old index gone)
        try:
            done = target in engine.request("GET", f"/{path_segment(index)}/_alias",
                                            context=f"reading which index {index!r} names")
        except EsbridgeError:
            raise IngestError(f"the documents are in the new index {target!r}, but replacing {old!r} with it "
                              f"failed: {err}; `esbridge indices` shows which index {index!r} now names (delete "
                              "the other, and run the same command again if it is the old one)",
                              report.failures, report=report) from err
        if not done:
            raise IngestError(f"the documents are in the new index {target!r}, but it could not replace {old!r}: "
                              f"{err}. {index!r} is unchanged; delete {target!r} and run the same command again",
                              report.failures, report=report) from err
    if old == index:
        return f"{index!r} is now an alias of the new index {target!r}; the old index {index!r} was deleted"
    return f"{index!r} now names the new index {target!r}; {old!r}, which it named before, was deleted"
