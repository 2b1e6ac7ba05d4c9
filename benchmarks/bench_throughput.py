"""Queries per second with several client threads: the engine's BM25 against esbridge's rerank.

The same judged queries are sent by ``--threads`` client threads for ``--seconds`` each run,
first as the engine's own BM25 query at the window, then through one :class:`Reranker`
shared by the threads (evolved, window 100): with the candidates' features read inside the
engine by esbridge's plugin (where the engine runs it), and with term vectors warm (every
candidate fetched once before) and cold (the vector cache cleared before each query).  The aim:
esbridge's warm rerank at least 0.8x the engine's queries per second.

Where the time goes: each run also reports the CPU time spent per query by this client process
(``time.process_time``, every thread) and by the engine (``_nodes/stats/process``, summed over the
nodes).  With the client and a local node on one machine, queries per second cannot exceed the
machine's cores divided by their sum; the report gives that bound, and the one the engine alone
would allow were the client on a machine of its own.

``--split-cores`` measures what that second bound projects: the engine's process (a node on this
machine, Linux) is pinned to the first half of the cores and this client to the other half for the
run, so that neither takes CPU from the other, as with a client on a machine of its own (the
engine then has half the cores for both its own query and esbridge's).

Usage (one command; starts esbridge's local node when no --url is given; ``DATA`` is the
folder that holds the BEIR-layout collections):

    python benchmarks/bench_throughput.py --dataset DATA/scifact --distribution opensearch
    python benchmarks/bench_throughput.py --dataset DATA/scifact --distribution opensearch --split-cores

Results go to ``benchmarks/results/throughput-<distribution>.md`` (``-split-cores.md`` with
``--split-cores``).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from esbridge.engine.client import Engine
from esbridge.engine.plan import run
from esbridge.features.plugin import features_plugin_plan
from esbridge.rerank import Reranker

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import connect_engine, engine_arguments, judged_collection, machine, write_report  # noqa: E402


def engine_pids(engine: Engine) -> list[int]:
    """The process ids of the engine's nodes, each checked to run on this machine."""
    info = engine.request("GET", "/_nodes/process", context="reading the nodes' process ids")
    pids = [int(n["process"]["id"]) for n in info["nodes"].values()]
    for pid in pids:
        if not Path(f"/proc/{pid}/task").is_dir():
            raise SystemExit(f"--split-cores: the engine's process {pid} is not on this machine (or this is "
                             "not Linux); pinning needs a local node")
    return pids


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process ``pid`` to ``cpus`` (threads it starts later inherit it)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except ProcessLookupError:  # the thread ended meanwhile
            pass


def engine_cpu_ms(engine: Engine) -> float:
    """CPU milliseconds the engine's nodes have spent since they started, summed over the nodes."""
    stats = engine.request("GET", "/_nodes/stats/process", context="reading the nodes' CPU time")
    return float(sum(n["process"]["cpu"]["total_in_millis"] for n in stats["nodes"].values()))


class Run(NamedTuple):
    """One timed run: queries per second, and CPU milliseconds per query of the client and the engine."""

    qps: float
    client_ms: float
    engine_ms: float


def qps(threads: int, seconds: float, queries: list[str], one: Callable[[str], object],
        engine: Engine) -> Run:
    """Queries per second of ``threads`` threads each running ``one`` over ``queries`` in turn."""
    done = [0] * threads
    errors: list[BaseException] = []
    stop = time.perf_counter() + seconds

    def work(k: int) -> None:
        i = k
        try:
            while time.perf_counter() < stop:
                one(queries[i % len(queries)])
                i += threads
                done[k] += 1
        except BaseException as err:  # reported below, never swallowed
            errors.append(err)

    cpu0, engine0 = time.process_time(), engine_cpu_ms(engine)
    start = time.perf_counter()
    pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - start
    cpu, engine_ms = time.process_time() - cpu0, engine_cpu_ms(engine) - engine0
    if errors:
        raise errors[0]
    n = max(sum(done), 1)
    return Run(sum(done) / elapsed, 1000.0 * cpu / n, engine_ms / n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True, help="BEIR-layout folder")
    engine_arguments(ap)
    ap.add_argument("--threads", default="1,4", help="client thread counts (default 1,4)")
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds per run (default 20)")
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--out", default=None)
    ap.add_argument("--split-cores", action="store_true",
                    help="pin the engine (a local node) to the first half of the cores, this client to the rest")
    args = ap.parse_args()

    engine = connect_engine(args)
    cores = os.cpu_count() or 1
    engine_cpus = client_cpus = set(range(cores))
    pinned: list[tuple[int, set[int]]] = []
    if args.split_cores:
        if cores < 2 or not hasattr(os, "sched_setaffinity"):
            raise SystemExit("--split-cores needs Linux and at least 2 cores")
        engine_cpus, client_cpus = set(range(cores // 2)), set(range(cores // 2, cores))
        for pid in engine_pids(engine):
            pinned.append((pid, os.sched_getaffinity(pid)))
            pin(pid, engine_cpus)
        pinned.append((os.getpid(), os.sched_getaffinity(0)))
        pin(os.getpid(), client_cpus)
    try:
        return measure(args, engine, engine_cpus, client_cpus)
    finally:
        for pid, cpus in pinned:
            pin(pid, cpus)


def measure(args: argparse.Namespace, engine: Engine, engine_cpus: set[int], client_cpus: set[int]) -> int:
    """The runs and the report (see the module text)."""
    split = engine_cpus != client_cpus
    folder, queries, index, expected = judged_collection(engine, args.dataset, args.queries)
    plugin = run(features_plugin_plan(engine), engine)
    rp = Reranker(engine, index, scorer="evolved", window=args.window, features="plugin" if plugin else "auto")
    # the warm and cold runs read term vectors (_mtermvectors), as on a cluster without the plugin
    rr = Reranker(engine, index, scorer="evolved", window=args.window, features="termvectors")
    field = rr.layout.subfield(rr.layout.combined, "base")  # type: ignore[union-attr]

    def engine_query(q: str) -> object:
        return engine.search(index, {"size": args.window, "query": {"match": {field: q}}})

    def through_plugin(q: str) -> object:
        return rp.search(q, size=10)

    def warm(q: str) -> object:
        return rr.search(q, size=10)

    def cold(q: str) -> object:
        rr.store.vectors.clear()
        return rr.search(q, size=10)

    lines = [f"# Throughput: {engine.info.label}", "",
             f"Machine: {machine()}. Engine: {engine.info.label} (local node, same machine). Collection: "
             f"{folder.resolve().name} ({expected} documents, {len(queries)} queries), window {args.window}, "
             f"{args.seconds:.0f} s a run.", "",
             f"Command: `python benchmarks/bench_throughput.py --dataset <path to {folder.resolve().name}> "
             f"--distribution {args.distribution}{' --split-cores' if split else ''}`", "",
             *([f"The engine's process pinned to core{'s' if len(engine_cpus) > 1 else ''} "
                f"{', '.join(map(str, sorted(engine_cpus)))} and this client to "
                f"{', '.join(map(str, sorted(client_cpus)))} for the whole run: neither takes CPU from the "
                "other, as with a client on a machine of its own.", ""] if split else []),
             "*plugin*: the candidates' features read inside the engine by esbridge's plugin (nothing kept on "
             "the client); *warm* and *cold*: read with `_mtermvectors` (as on a cluster without the plugin), "
             "warm from the reranker's memory cache (every candidate fetched once before), cold with the cache "
             "cleared before each query.", "",
             "| client threads | engine BM25 q/s | esbridge plugin q/s | plugin / engine | esbridge warm q/s | "
             "warm / engine | esbridge cold q/s | cold / engine |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    cores = os.cpu_count() or 1
    if split:
        cpu_lines = ["", "Where the time goes: CPU milliseconds per query, of this client process (every thread) "
                     "and of the engine (its nodes' process CPU), in the same runs. Each side is bound by its own "
                     "cores: the engine at its cores / engine CPU per query, the client at its cores / client CPU "
                     "per query.", "",
                     "| client threads | run | q/s | client CPU ms/query | engine CPU ms/query | bound, engine's "
                     "cores, q/s | bound, client's cores, q/s |", "|---:|---|---:|---:|---:|---:|---:|"]
    else:
        cpu_lines = ["", "Where the time goes: CPU milliseconds per query, of this client process (every thread) "
                     f"and of the engine (its nodes' process CPU), in the same runs. The machine has {cores} cores, "
                     "shared by both: its bound is cores / (client + engine) CPU per query; the engine's own bound "
                     "is cores / engine CPU per query, what a client on a machine of its own would be held to "
                     "(`--split-cores` measures it).", "",
                     "| client threads | run | q/s | client CPU ms/query | engine CPU ms/query | bound, both on "
                     "this machine, q/s | bound, engine alone, q/s |", "|---:|---|---:|---:|---:|---:|---:|"]

    def cpu_line(n: int, name: str, r: Run) -> str:
        if split:
            first = 1000.0 * len(engine_cpus) / max(r.engine_ms, 1e-9)
            second = 1000.0 * len(client_cpus) / max(r.client_ms, 1e-9)
        else:
            first = 1000.0 * cores / max(r.client_ms + r.engine_ms, 1e-9)
            second = 1000.0 * cores / max(r.engine_ms, 1e-9)
        return (f"| {n} | {name} | {r.qps:.1f} | {r.client_ms:.2f} | {r.engine_ms:.2f} | {first:.0f} | "
                f"{second:.0f} |")

    for n in (int(t) for t in args.threads.split(",")):
        e = qps(n, args.seconds, queries, engine_query, engine)
        p = qps(n, args.seconds, queries, through_plugin, engine) if plugin else None
        for q in queries:  # every candidate's vectors fetched once: the warm run reads them from memory
            warm(q)
        w = qps(n, args.seconds, queries, warm, engine)
        c = qps(n, args.seconds, queries, cold, engine)
        cells = f"{p.qps:.1f} | {p.qps / e.qps:.2f}x" if p is not None else "— | —"
        lines.append(f"| {n} | {e.qps:.1f} | {cells} | {w.qps:.1f} | {w.qps / e.qps:.2f}x | {c.qps:.1f} | "
                     f"{c.qps / e.qps:.2f}x |")
        print(lines[-1], file=sys.stderr)
        for name, r in (("engine BM25", e), ("esbridge plugin", p), ("esbridge warm", w), ("esbridge cold", c)):
            if r is not None:
                cpu_lines.append(cpu_line(n, name, r))
    lines += cpu_lines
    rr.close()
    rp.close()
    stem = f"throughput-{args.distribution}" + ("-split-cores" if split else "")
    write_report("\n".join(lines), Path(args.out) if args.out else HERE / "results" / f"{stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
