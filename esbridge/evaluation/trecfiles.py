"""Topics, judgments and run files, read with errors that name the file and the line.

Topics (:func:`read_topics`), one of:

- BEIR queries: JSON lines ``{"_id": "1", "text": "..."}``;
- TREC topics: ``<top>`` blocks with ``<num> Number: 51``, ``<title>``, ``<desc> Description:``
  and ``<narr> Narrative:`` (closing tags such as ``</title>`` are allowed, other fields such as
  ``<head>``, ``<dom>`` or ``<con>`` are read and ignored); a numeric topic number loses its leading zeros
  (``051`` is topic ``51``, as TREC's judgments write it);
- a tab-separated file ``id<TAB>text``.

Judgments (:func:`read_qrels`): TREC qrels ``qid iteration docid relevance`` (whitespace
separated), or BEIR's ``query-id<TAB>corpus-id<TAB>score`` with its header line.

Runs (:func:`read_run`): TREC run files ``qid Q0 docid rank score tag``.  A run is ordered as
trec_eval orders it, by score descending and, for equal scores, by document id descending; the
rank column is checked but not used.

Any of these files may be gzip-compressed (a name ending in ``.gz``).
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from esbridge.errors import DatasetError
from esbridge.jsoninput import parse_json

__all__ = [
    "TOPIC_FIELDS",
    "InputFileError",
    "RunFile",
    "Topic",
    "read_qrels",
    "read_run",
    "read_topics",
    "trec_order",
]

#: What a topic's query text is made of: its title, its description, or both.
TOPIC_FIELDS = ("title", "desc", "title+desc")


class InputFileError(DatasetError):
    """A topics, judgments or run file that cannot be read; the message names the file and line."""


def _where(path: Path, line: int | None = None) -> str:
    return f"{path}, line {line}" if line else str(path)


def _read_text(path: str | Path, what: str) -> tuple[Path, str]:
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputFileError(f"{what} file {str(p)!r} does not exist") from None
    except OSError as err:
        raise InputFileError(f"{what} file {str(p)!r} cannot be read: {err.strerror or err}") from None
    if p.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise InputFileError(f"{p}: not a gzip file ({err})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise InputFileError(f"{_where(p, line)}: not UTF-8 text ({err.reason})") from None
    return p, text.removeprefix("\ufeff")


# ---- topics --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Topic:
    """A topic: its id, its fields, and the line of the file it starts on."""

    id: str
    title: str
    description: str = ""
    narrative: str = ""
    line: int = 0

    def text(self, field: str = "title") -> str:
        """The query text: ``title``, ``desc`` or ``title+desc``."""
        if field == "title":
            return self.title
        if field == "desc":
            return self.description
        if field == "title+desc":
            return " ".join(t for t in (self.title, self.description) if t)
        raise InputFileError(f"topic field {field!r} is not one of {', '.join(TOPIC_FIELDS)}")


def read_topics(path: str | Path, field: str = "title") -> list[Topic]:
    """The topics of a BEIR ``queries.jsonl``, a TREC topics file or an ``id<TAB>text`` file, in file
    order, each with a non-empty text for ``field`` (``title``, ``desc`` or ``title+desc``).

    Raises:
        InputFileError: an unreadable or malformed file, a repeated topic id, a topic whose
            ``field`` is empty, or a field the format does not have (BEIR queries have no
            description).
    """
    if field not in TOPIC_FIELDS:
        raise InputFileError(f"topic field {field!r} is not one of {', '.join(TOPIC_FIELDS)}")
    p, text = _read_text(path, "topics")
    stripped = text.lstrip()
    if not stripped:
        raise InputFileError(f"{p} holds no topics")
    if stripped.startswith("{"):
        topics, fmt = _jsonl_topics(p, text), "BEIR queries"
    elif re.search(r"<\s*/?\s*top\s*>", text, re.I):
        topics, fmt = _trec_topics(p, text), "TREC topics"
    elif "\t" in stripped.splitlines()[0]:
        topics, fmt = _tsv_topics(p, text), "tab-separated topics"
    else:
        first = len(text) - len(stripped)
        line = text[:first].count("\n") + 1
        raise InputFileError(
            f"{_where(p, line)}: not a topics file: expected BEIR queries (JSON lines with _id and text), "
            "TREC topics (<top> <num> <title> ... </top>) or id<TAB>text lines")
    if not topics:
        raise InputFileError(f"{p} holds no topics")
    if fmt != "TREC topics" and field != "title":
        raise InputFileError(f"{p}: {fmt} have a text only, no description; use --topic-field title")
    seen: dict[str, int] = {}
    for t in topics:
        if t.id in seen:
            raise InputFileError(f"{_where(p, t.line)}: topic {t.id!r} again (first at line {seen[t.id]})")
        seen[t.id] = t.line
        if not t.text(field).strip():
            raise InputFileError(f"{_where(p, t.line)}: topic {t.id!r} has no {field} text"
                                 + ("; choose another --topic-field" if fmt == "TREC topics" else ""))
    return topics


def _jsonl_topics(path: Path, text: str) -> list[Topic]:
    out = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = parse_json(line, _where(path, line_no))
        except json.JSONDecodeError as err:
            raise InputFileError(f"{_where(path, line_no)}: not a JSON object ({err.msg})") from None
        if not isinstance(obj, dict) or "_id" not in obj or not isinstance(obj.get("text"), str):
            raise InputFileError(f"{_where(path, line_no)}: expected a query object with \"_id\" and \"text\"")
        qid = str(obj["_id"]).strip()
        if not qid or any(c.isspace() for c in qid):
            raise InputFileError(f"{_where(path, line_no)}: query id {obj['_id']!r} is empty or holds a space")
        out.append(Topic(qid, " ".join(obj["text"].split()), line=line_no))
    return out


def _tsv_topics(path: Path, text: str) -> list[Topic]:
    out = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        qid, tab, body = line.partition("\t")
        qid = qid.strip()
        if not tab or not qid or any(c.isspace() for c in qid):
            raise InputFileError(f"{_where(path, line_no)}: expected id<TAB>text, got {line[:80]!r}")
        out.append(Topic(qid, " ".join(body.split()), line=line_no))
    return out


_TAG = re.compile(r"<\s*(/?)\s*(top|head|num|title|desc|narr|dom|con|fac|def|smry|nat)\s*>", re.I)
_PREFIX = {"num": "number:", "title": "topic:", "desc": "description:", "narr": "narrative:"}


def _trec_topics(path: Path, text: str) -> list[Topic]:
    starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(offset: int) -> int:
        return bisect.bisect_right(starts, offset)

    out: list[Topic] = []
    top_line: int | None = None
    fields: dict[str, tuple[str, int]] = {}
    current: str | None = None
    pos = 0

    def take(chunk: str, at: int) -> None:
        nonlocal current
        if not chunk.strip():
            return
        if top_line is None:
            raise InputFileError(f"{_where(path, line_of(at + len(chunk) - len(chunk.lstrip())))}: "
                                 f"text outside <top> ... </top>: {chunk.strip()[:60]!r}")
        if current is None:
            raise InputFileError(f"{_where(path, line_of(at + len(chunk) - len(chunk.lstrip())))}: "
                                 f"text outside any field of the topic opened at line {top_line}: "
                                 f"{chunk.strip()[:60]!r}")
        body, line = fields[current]
        fields[current] = (body + " " + chunk, line)

    for m in _TAG.finditer(text):
        take(text[pos:m.start()], pos)
        pos = m.end()
        closing, tag, line = bool(m.group(1)), m.group(2).lower(), line_of(m.start())
        if tag == "top":
            if not closing:
                if top_line is not None:
                    raise InputFileError(f"{_where(path, line)}: <top> inside the topic opened at line {top_line} "
                                         "(is a </top> missing?)")
                top_line, fields, current = line, {}, None
                continue
            if top_line is None:
                raise InputFileError(f"{_where(path, line)}: </top> without a <top>")
            out.append(_trec_topic(path, top_line, fields))
            top_line, current = None, None
            continue
        if top_line is None:
            raise InputFileError(f"{_where(path, line)}: <{'/' if closing else ''}{m.group(2)}> outside "
                                 "<top> ... </top>")
        if closing:
            current = None
            continue
        if tag in fields:
            raise InputFileError(f"{_where(path, line)}: a second <{m.group(2)}> in the topic opened at "
                                 f"line {top_line}")
        fields[tag] = ("", line)
        current = tag
    take(text[pos:], pos)
    if top_line is not None:
        raise InputFileError(f"{_where(path, top_line)}: <top> is never closed by </top>")
    return out


def _trec_topic(path: Path, top_line: int, fields: Mapping[str, tuple[str, int]]) -> Topic:
    def value(tag: str) -> str:
        body = " ".join(fields.get(tag, ("", 0))[0].split())
        prefix = _PREFIX.get(tag)
        if prefix and body.lower().startswith(prefix):
            body = body[len(prefix):].strip()
        return body

    if "num" not in fields:
        raise InputFileError(f"{_where(path, top_line)}: the topic has no <num>")
    num = value("num").split()
    if len(num) != 1:
        raise InputFileError(f"{_where(path, fields['num'][1])}: <num> should hold one topic number, "
                             f"got {' '.join(num)!r}")
    qid = num[0]
    if qid.isdigit():
        qid = str(int(qid))
    return Topic(qid, value("title"), value("desc"), value("narr"), line=top_line)


# ---- judgments -----------------------------------------------------------------------------

def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """``{query_id: {doc_id: grade}}`` from TREC qrels (``qid 0 docid rel``) or BEIR judgments
    (``query-id<TAB>corpus-id<TAB>score`` after a header line).

    Raises:
        InputFileError: an unreadable file, a line of neither form (or of the other form than
            the file's first), a grade that is not an integer, a document judged twice with
            different grades, or no judgments at all.
    """
    p, text = _read_text(path, "judgments")
    out: dict[str, dict[str, int]] = {}
    where: dict[tuple[str, str], int] = {}
    fmt: str | None = None
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        tabbed = line.rstrip("\r").split("\t")
        cols = line.split()
        if fmt is None:
            if len(tabbed) == 3:
                fmt = "beir"
                if not _is_grade(tabbed[2].strip()):
                    continue  # the header line
            elif len(cols) == 4:
                fmt = "trec"
            else:
                raise InputFileError(
                    f"{_where(p, line_no)}: expected TREC judgments 'query-id iteration doc-id relevance' or "
                    f"BEIR judgments 'query-id<TAB>corpus-id<TAB>score', got {line.strip()[:80]!r}")
        if fmt == "beir":
            if len(tabbed) != 3 or not all(c.strip() for c in tabbed):
                raise InputFileError(f"{_where(p, line_no)}: expected query-id<TAB>corpus-id<TAB>score like "
                                     f"the lines before, got {line.strip()[:80]!r}")
            qid, doc, grade_text = (c.strip() for c in tabbed)
        else:
            if len(cols) != 4:
                raise InputFileError(f"{_where(p, line_no)}: expected 'query-id iteration doc-id relevance' "
                                     f"like the lines before, got {line.strip()[:80]!r}")
            qid, _, doc, grade_text = cols
        grade = _grade(grade_text)
        if grade is None:
            raise InputFileError(f"{_where(p, line_no)}: relevance {grade_text!r} is not an integer")
        before = out.setdefault(qid, {}).get(doc)
        if before is not None and before != grade:
            raise InputFileError(f"{_where(p, line_no)}: document {doc!r} of query {qid!r} judged {grade} here "
                                 f"and {before} at line {where[(qid, doc)]}")
        out[qid][doc] = grade
        where.setdefault((qid, doc), line_no)
    if not out:
        raise InputFileError(f"{p} holds no judgments")
    return out


def _grade(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if math.isfinite(value) and value == int(value) else None


def _is_grade(text: str) -> bool:
    return _grade(text) is not None


# ---- runs ----------------------------------------------------------------------------------

@dataclass
class RunFile:
    """A TREC run read from a file.

    Attributes:
        path: the file.
        tags: the run tags of its lines, in order of appearance.
        ranking: ``{qid: [doc_id, ...]}`` in trec_eval's order (score descending, then doc id
            descending).
        scores: ``{qid: [score, ...]}`` aligned with ``ranking``.
        sha256: SHA-256 of the file's bytes.
    """

    path: Path
    tags: tuple[str, ...]
    ranking: dict[str, list[str]] = field(default_factory=dict)
    scores: dict[str, list[float]] = field(default_factory=dict)
    sha256: str = ""

    @property
    def name(self) -> str:
        """The run's tag when it has one, else the file's name without ``.trec``/``.gz``."""
        if len(self.tags) == 1:
            return self.tags[0]
        name = self.path.name
        for suffix in (".gz", ".trec", ".run", ".txt"):
            name = name.removesuffix(suffix)
        return name


def trec_order(docs: list[str], scores: list[float]) -> tuple[list[str], list[float]]:
    """``docs`` as trec_eval ranks them: score descending, then document id descending."""
    pairs = sorted(zip(docs, scores), key=lambda ds: (ds[1], ds[0]), reverse=True)
    return [d for d, _ in pairs], [s for _, s in pairs]


def read_run(path: str | Path) -> RunFile:
    """A TREC run file (``qid Q0 docid rank score tag``, whitespace separated).

    Raises:
        InputFileError: an unreadable file, a line without six columns, a rank that is not an
            integer, a score that is not a finite number, a document listed twice for a query,
            or no lines at all.
    """
    import hashlib

    p, text = _read_text(path, "run")
    docs: dict[str, dict[str, tuple[float, int]]] = {}
    tags: dict[str, None] = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cols = line.split()
        if len(cols) != 6:
            raise InputFileError(f"{_where(p, line_no)}: expected 'query-id Q0 doc-id rank score tag' "
                                 f"(6 columns), got {len(cols)}: {line.strip()[:80]!r}")
        qid, _, doc, rank, score_text, tag = cols
        try:
            int(rank)
        except ValueError:
            raise InputFileError(f"{_where(p, line_no)}: rank {rank!r} is not an integer") from None
        try:
            score = float(score_text)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise InputFileError(f"{_where(p, line_no)}: score {score_text!r} is not a finite number")
        seen = docs.setdefault(qid, {})
        if doc in seen:
            raise InputFileError(f"{_where(p, line_no)}: document {doc!r} again for query {qid!r} "
                                 f"(first at line {seen[doc][1]})")
        seen[doc] = (score, line_no)
        tags[tag] = None
    if not docs:
        raise InputFileError(f"{p} holds no run lines")
    run = RunFile(p, tuple(tags), sha256=hashlib.sha256(p.read_bytes()).hexdigest())
    for qid, by_doc in docs.items():
        run.ranking[qid], run.scores[qid] = trec_order(list(by_doc), [s for s, _ in by_doc.values()])
    return run
