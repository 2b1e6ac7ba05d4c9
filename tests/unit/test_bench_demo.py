"""``benchmarks/bench_demo.py``: the README's first command split and timed, its steps read from the
demo's progress (nothing run here)."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.scripts import benchmark_script


def _bench_demo() -> ModuleType:
    return benchmark_script("bench_demo")


def test_the_readme_command_is_split_and_the_demo_given_its_own_index() -> None:
    bd = _bench_demo()
    command = bd.readme_first_command()
    split = bd.parts(command, "esbridge-demo-bench-1")
    assert " && ".join(split) == command + " --index esbridge-demo-bench-1"
    assert split[-1].endswith("esbridge demo --index esbridge-demo-bench-1")
    with pytest.raises(SystemExit):
        bd.parts("python3 -m venv .venv && .venv/bin/esbridge search x", "i")
    assert bd.parts(command, "i", " --pipeline ensemble ")[-1].endswith("esbridge demo --index i --pipeline ensemble")


def test_the_steps_are_timed_from_their_first_progress_line() -> None:
    bd = _bench_demo()
    progress = bd.Progress(start=100.0)
    progress.feed("\rstarting esbridge's local opensearch-knn node (about a minute) ... 1s ", 101.0)
    progress.feed("\rstarting esbridge's local opensearch-knn node (about a minute) ... 7s done\n", 107.0)
    progress.feed("indexing esbridge-demo-bench-1:  10%|", 108.0)
    progress.feed("\rindexing esbridge-demo-bench-1: 100%|\nembedding esbridge-demo-", 110.0)
    progress.feed("bench-1:   1%|", 111.0)  # seen at 110: its line began there
    progress.feed("\rre-embedding nothing\nranking 50 judged queries:   0%|", 196.0)
    assert progress.seen == {"node start": 1.0, "indexing": 8.0, "embedding": 10.0, "ranking": 96.0}
    steps = bd.steps(progress.seen, 110.0)
    assert steps == [("node start", 1.0, 7.0), ("indexing", 8.0, 2.0), ("embedding", 10.0, 86.0),
                     ("ranking", 96.0, 14.0)]
    timed = [("python3 -m venv .venv", 4.0), (".venv/bin/pip install -e '.[semantic]'", 36.0),
             (".venv/bin/esbridge demo --index i", 110.0)]
    text = bd.report("python3 -m venv .venv && ...", "i", timed, steps, "cpu: AMD EPYC, cores: 2",
                     "AMD EPYC 7B13, 2 cores, AVX2, no AVX-512",
                     "...\nnDCG@10 over 50 judged queries: engine BM25 0.650, esbridge hybrid 0.750 (+10.0 points)\n")
    assert ("Summary: 2 min 30 s on AMD EPYC 7B13, 2 cores, AVX2, no AVX-512: 40 s to create the environment "
            "and install esbridge, 1 min 50 s for the demo (node start 7 s, indexing 2 s, embedding 86 s, "
            "ranking 14 s)\n") in text
    assert "| the whole command | 150.0 |" in text and "| embedding | 10.0 | 86.0 |" in text
    assert "The demo's result: nDCG@10 over 50 judged queries: engine BM25 0.650" in text
