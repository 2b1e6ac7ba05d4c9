"""Batch runs are resumable: a run file cut anywhere (a killed process, a write cut short) and run
again is byte for byte the uninterrupted run's; a file that is not such a run is refused, never
overwritten."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from esbridge.errors import ConfigurationError
from esbridge.evaluation.batch import resume_point, trec_lines, write_run
from esbridge.evaluation.trecfiles import InputFileError, Topic, read_run

ROOT = Path(__file__).resolve().parents[2]
DEPTH = 8
TOPICS = [Topic(f"t{i}", f"query {i}") for i in range(40)]


def fake_rank(topic: Topic) -> tuple[list[str], list[float]]:
    """A deterministic ranking: most topics have DEPTH + 4 hits, some fewer than DEPTH, some none."""
    n = int(topic.id[1:])
    size = 0 if n % 13 == 5 else (3 if n % 7 == 2 else DEPTH + 4)
    docs = [f"d{hashlib.sha256(f'{topic.id}:{k}'.encode()).hexdigest()[:8]}" for k in range(size)]
    return docs, [float(size - k) / 3.0 for k in range(size)]


@pytest.fixture
def reference(tmp_path: Path) -> bytes:
    path = tmp_path / "reference.trec"
    report = write_run(path, TOPICS, fake_rank, tag="mine", depth=DEPTH, progress=False)
    assert report.ranked == len(TOPICS) and report.resumed == 0
    assert report.empty == [t.id for t in TOPICS if int(t.id[1:]) % 13 == 5]
    return path.read_bytes()


def test_trec_lines() -> None:
    assert (trec_lines("q1", ["a", "b", "c"], [2.0, 1.5, 1.0], "tag", 2)
            == "q1 Q0 a 1 2.000000 tag\nq1 Q0 b 2 1.500000 tag\n")
    assert trec_lines("q1", [], [], "tag") == ""


def test_the_run_file_is_a_trec_run(reference: bytes, tmp_path: Path) -> None:
    path = tmp_path / "r.trec"
    path.write_bytes(reference)
    run = read_run(path)
    assert run.tags == ("mine",)
    assert len(run.ranking) == len(TOPICS) - 3  # t5, t18, t31 have no hits
    assert all(len(docs) <= DEPTH for docs in run.ranking.values())
    assert reference.decode().splitlines()[0].split()[1:4:2] == ["Q0", "1"]


def test_a_file_cut_anywhere_resumes_to_the_same_bytes(reference: bytes, tmp_path: Path) -> None:
    line_ends = [i + 1 for i, b in enumerate(reference) if b == ord("\n")]
    cuts = sorted({0, 1, len(reference) - 1, len(reference), *line_ends[:: max(1, len(line_ends) // 25)],
                   *(e - 7 for e in line_ends[5::40]), *(e + 3 for e in line_ends[10::40])})
    for cut in cuts:
        path = tmp_path / f"cut-{cut}.trec"
        path.write_bytes(reference[:cut])
        report = write_run(path, TOPICS, fake_rank, tag="mine", depth=DEPTH, progress=False)
        assert path.read_bytes() == reference, f"cut at byte {cut}"
        assert report.resumed + report.ranked == len(TOPICS)


def test_an_interrupted_run_resumes_where_it_stopped(reference: bytes, tmp_path: Path) -> None:
    path = tmp_path / "run.trec"
    seen: list[str] = []

    def interrupted(topic: Topic) -> tuple[list[str], list[float]]:
        if len(seen) == 16:
            raise KeyboardInterrupt
        seen.append(topic.id)
        return fake_rank(topic)

    with pytest.raises(KeyboardInterrupt):
        write_run(path, TOPICS, interrupted, tag="mine", depth=DEPTH, progress=False)
    assert len(path.read_bytes()) < len(reference)
    ranked_again: list[str] = []

    def counting(topic: Topic) -> tuple[list[str], list[float]]:
        ranked_again.append(topic.id)
        return fake_rank(topic)

    report = write_run(path, TOPICS, counting, tag="mine", depth=DEPTH, progress=False)
    assert path.read_bytes() == reference
    # of the 16 done before, only the one without hits (t5) is ranked again: t15 ends with DEPTH lines
    assert ranked_again[:3] == ["t5", "t16", "t17"] and "t15" not in ranked_again
    assert report.resumed == 15 and report.ranked == len(TOPICS) - 15
    again = write_run(path, TOPICS, fake_rank, tag="mine", depth=DEPTH, progress=False)
    assert path.read_bytes() == reference and again.ranked == 3  # the topics without hits


def test_a_killed_process_resumes_to_the_same_bytes(reference: bytes, tmp_path: Path) -> None:
    path = tmp_path / "killed.trec"
    child = (
        "import sys, time\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from esbridge.evaluation.batch import write_run\n"
        "from tests.unit.test_batch_run import TOPICS, DEPTH, fake_rank\n"
        "def slow(topic):\n"
        "    time.sleep(0.05)\n"
        "    return fake_rank(topic)\n"
        f"write_run({str(path)!r}, TOPICS, slow, tag='mine', depth=DEPTH, progress=False)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", child], env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not path.exists() or path.stat().st_size < len(reference) // 3):
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert 0 < path.stat().st_size < len(reference)
    report = write_run(path, TOPICS, fake_rank, tag="mine", depth=DEPTH, progress=False)
    assert path.read_bytes() == reference
    assert report.resumed > 0


def _refused(tmp_path: Path, text: str, match: str, *, topics: list[Topic] = TOPICS) -> None:
    path = tmp_path / "other.trec"
    path.write_text(text)
    with pytest.raises(InputFileError, match=match):
        write_run(path, topics, fake_rank, tag="mine", depth=DEPTH, progress=False)
    assert path.read_text() == text  # never overwritten


def test_files_of_other_runs_are_refused(tmp_path: Path) -> None:
    _refused(tmp_path, "t0 Q0 a 1 1.0 theirs\n", r"other\.trec, line 1: this file holds a run tagged 'theirs', "
                                                 r"not 'mine': another run; give another --output")
    _refused(tmp_path, "t0 Q0 a 1 1.0 mine\nx9 Q0 a 1 1.0 mine\n",
             r"line 2: topic 'x9' is not among the topics")
    _refused(tmp_path, "t0 Q0 a 1 1.0 mine\nt1 Q0 a 1 1.0 mine\nt0 Q0 b 1 1.0 mine\n",
             r"line 3: topic 't0' again \(first at line 1\)")
    _refused(tmp_path, "".join(f"t0 Q0 d{k} {k} 1.0 mine\n" for k in range(1, DEPTH + 2)),
             r"line 1: more than 8 lines for topic 't0', the depth")
    _refused(tmp_path, "t0 Q0 a 1 1.0 mine\nt0 Q0 b 3 1.0 mine\n",
             r"line 2: rank 3 where 2 was expected: not a run written by esbridge run")
    _refused(tmp_path, "t0 Q0 a 1 1.0 mine\nt0 garbage\n", r"line 2: not a run written by esbridge run")
    # judgments given as the output by mistake: one topic, cut short or not, is never truncated
    _refused(tmp_path, "t0 0 doc 1\n", r"line 1: not a run written by esbridge run")


def test_resume_point_and_arguments(tmp_path: Path) -> None:
    path = tmp_path / "r.trec"
    assert resume_point(path, ["t0"], "mine", 2) == ([], 0, 0)
    path.write_text("t0 Q0 a 1 1.0 mine\nt0 Q0 b 2 0.5 mine\nt1 Q0 a 1 1.0 mine\n")
    # t1 has fewer lines than the depth: it may have been cut short, so it is done again
    assert resume_point(path, ["t0", "t1"], "mine", 2) == (["t0"], 38, 1)
    assert resume_point(path, ["t0", "t1"], "mine", 1 + 1) == (["t0"], 38, 1)
    path.write_text("t0 Q0 a 1 1.0 mine\nt0 Q0 b 2 0.5 mine\n")
    assert resume_point(path, ["t0", "t1"], "mine", 2) == (["t0"], 38, 0)
    path.write_text("t0 Q0 a 1 1.0 mine\nt0 Q0 b 2 0.5 mine\nt1 Q0 a 1 1")  # cut inside t1's first line
    assert resume_point(path, ["t0", "t1"], "mine", 2) == (["t0"], 38, 1)
    path.write_text("t0 Q0 a 1 1.0 mine\nt0 Q0 b 2 0.")  # cut inside t0's last line
    assert resume_point(path, ["t0", "t1"], "mine", 2) == ([], 0, 2)
    with pytest.raises(ConfigurationError, match="depth must be >= 1"):
        write_run(path, TOPICS, fake_rank, tag="mine", depth=0, progress=False)
    with pytest.raises(ConfigurationError, match="without spaces"):
        write_run(path, TOPICS, fake_rank, tag="my run", progress=False)
