"""Batch runs: every topic of a file ranked into a TREC run file, resumably.

:func:`write_run` appends each topic's lines to the run file in one write, then flushes them
to disk (``fsync``) before the next topic starts, so an interrupted run (Ctrl-C, a killed
process, a lost engine) leaves whole topics followed by at most one cut-short topic.  Run again
with the same output, it keeps the topics already complete in the file, discards the last one
unless it is certainly complete (it has ``depth`` whole lines), and ranks the rest: the file ends
up byte for byte what an uninterrupted run writes.

A file that is not such a run is never changed: a line that is not a run line, of another run
tag or of a topic not in the topics file, ranks out of order, or more than ``depth`` lines for a
topic are an error naming the line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from esbridge.errors import ConfigurationError
from esbridge.evaluation.trecfiles import InputFileError, Topic

__all__ = ["BatchReport", "resume_point", "trec_lines", "write_run"]

#: A topic -> its ranking: ``(doc_ids, scores)``, best first.
Ranker = Callable[[Topic], tuple[Sequence[str], Sequence[float]]]


def trec_lines(qid: str, ids: Sequence[str], scores: Sequence[float], tag: str, depth: int | None = None) -> str:
    """One query's lines of a TREC run file: ``qid Q0 docid rank score tag``, the top ``depth``."""
    pairs = list(zip(ids, scores))[:depth]
    return "".join(f"{qid} Q0 {doc} {rank} {score:.6f} {tag}\n" for rank, (doc, score) in enumerate(pairs, start=1))


@dataclass
class BatchReport:
    """What :func:`write_run` did.

    Attributes:
        path: the run file.
        topics: topics in the topics file.
        resumed: topics found complete in the file and not ranked again.
        ranked: topics ranked by this call.
        empty: topics with no hits (they have no lines in the file).
        discarded_lines: lines of a cut-short last topic that were removed before resuming.
    """

    path: Path
    topics: int
    resumed: int = 0
    ranked: int = 0
    empty: list[str] = field(default_factory=list)
    discarded_lines: int = 0

    def summary(self) -> str:
        parts = [f"{self.topics} topics in {self.path}"]
        if self.resumed:
            parts.append(f"{self.resumed} already there")
        parts.append(f"{self.ranked} ranked now")
        if self.empty:
            parts.append(f"{len(self.empty)} without hits ({', '.join(self.empty[:5])}"
                         f"{', ...' if len(self.empty) > 5 else ''})")
        if self.discarded_lines:
            parts.append(f"{self.discarded_lines} lines of a cut-short topic redone")
        return ", ".join(parts)


@dataclass
class _Group:
    """Consecutive lines of one topic in a run file."""

    qid: str
    start: int
    first_line: int
    end: int
    lines: int = 1


def resume_point(path: Path, topic_ids: Sequence[str], tag: str, depth: int) -> tuple[list[str], int, int]:
    """The topics complete in an existing run file, the byte length to keep, and the number of
    lines of a cut-short last topic that are dropped.

    Appending a topic's lines can be cut short only at its end: every line but a last one
    without its newline is whole.  So every whole line must be a line of this run (its tag, one
    of the topics, ranks 1, 2, 3, ...); the last topic is kept when it has ``depth`` lines and
    dropped otherwise (it is ranked again), with any unfinished line.

    Raises:
        InputFileError: the file is not a run this command could have written for these topics
            (a line that is not a run line, another tag, an unknown topic, a topic in two places,
            ranks out of order, or more than ``depth`` lines for a topic).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], 0, 0
    except OSError as err:
        raise InputFileError(f"run file {str(path)!r} cannot be read: {err.strerror or err}") from None
    known = set(topic_ids)
    groups: list[_Group] = []
    seen: dict[str, int] = {}
    offset = 0
    fragment = 0
    for line_no, raw in enumerate(data.splitlines(keepends=True), start=1):
        start, offset = offset, offset + len(raw)
        if not raw.endswith(b"\n"):
            fragment = 1  # an unfinished last line: the write was cut short here
            break
        try:
            cols = raw.decode("utf-8").split()
        except UnicodeDecodeError:
            cols = []
        if len(cols) != 6 or cols[1] != "Q0":
            raise InputFileError(f"{path}, line {line_no}: not a run written by esbridge run (expected "
                                 "'query-id Q0 doc-id rank score tag'); give another --output")
        qid = cols[0]
        if cols[5] != tag:
            raise InputFileError(f"{path}, line {line_no}: this file holds a run tagged {cols[5]!r}, not {tag!r}: "
                                 "another run; give another --output")
        if qid not in known:
            raise InputFileError(f"{path}, line {line_no}: topic {qid!r} is not among the topics; give another "
                                 "--output for another topics file")
        if groups and groups[-1].qid == qid:
            group = groups[-1]
            group.lines += 1
            group.end = offset
        else:
            if qid in seen:
                raise InputFileError(f"{path}, line {line_no}: topic {qid!r} again (first at line {seen[qid]}); "
                                     "give another --output")
            seen[qid] = line_no
            group = _Group(qid, start, line_no, offset)
            groups.append(group)
        if cols[3] != str(group.lines):
            raise InputFileError(f"{path}, line {line_no}: rank {cols[3]} where {group.lines} was expected: not a "
                                 "run written by esbridge run; give another --output")
        if group.lines > depth:
            raise InputFileError(f"{path}, line {group.first_line}: more than {depth} lines for topic {qid!r}, "
                                 "the depth: was the file written with another --depth?")
    if not groups:
        return [], 0, fragment
    last = groups[-1]
    if last.lines == depth:
        return [g.qid for g in groups], last.end, fragment
    # possibly cut short: its lines are dropped and the topic ranked again
    return [g.qid for g in groups[:-1]], last.start, last.lines + fragment


def write_run(path: str | Path, topics: Sequence[Topic], rank: Ranker, *, tag: str, depth: int = 1000,
              progress: bool = False) -> BatchReport:
    """Rank every topic with ``rank`` and write the top ``depth`` of each to the TREC run file
    ``path``, resuming a run interrupted earlier (see the module's description).

    Raises:
        InputFileError: ``path`` holds something else than a run of these topics and this tag.
        ConfigurationError: ``depth`` below 1, or a tag with spaces.
    """
    if depth < 1:
        raise ConfigurationError(f"depth must be >= 1, got {depth}")
    if not tag or any(c.isspace() for c in tag):
        raise ConfigurationError(f"run tag {tag!r} must be a non-empty word without spaces")
    out = Path(path)
    done, keep, dropped = resume_point(out, [t.id for t in topics], tag, depth)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = BatchReport(out, len(topics), resumed=len(done), discarded_lines=dropped)
    fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size != keep:
            os.ftruncate(fd, keep)
            os.fsync(fd)
        os.lseek(fd, keep, os.SEEK_SET)
        skip = set(done)
        todo = [t for t in topics if t.id not in skip]
        from tqdm import tqdm

        for topic in tqdm(todo, desc=f"run {out.name}", unit="topic", total=len(topics),
                          initial=len(topics) - len(todo),
                          disable=not progress, file=sys.stderr):
            ids, scores = rank(topic)
            block = trec_lines(topic.id, ids, scores, tag, depth).encode("utf-8")
            if not block:
                report.empty.append(topic.id)
            view = memoryview(block)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
            report.ranked += 1
    finally:
        os.close(fd)
    return report
