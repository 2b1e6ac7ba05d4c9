"""What ``esbridge serve`` costs: the same queries through the server, through the Python API and
straight to the engine, with 1 and 8 concurrent clients.

Seven ways to answer each judged query (its top 10):

* **engine**: the engine's own BM25 query, sent to the engine by opensearch-py;
* **byte relay**: the same, through ``byte_relay.py`` (a process that copies bytes between the
  client and the engine and does nothing else): what one hop through Python costs;
* **passed through**: the same request sent to the server with ``ext.esbridge.rerank`` false
  (what the server adds to a request it passes on);
* **Python API**: :meth:`Reranker.search` (evolved, window 100), one reranker shared by the
  client threads;
* **server**: opensearch-py pointed at ``esbridge serve`` (a process of its own, evolved, window
  100), a ``match`` query: reranked as the Python API reranks it;
* and, highlighted: the same ``match`` with ``highlight`` on ``text``, sent to the engine and to the
  server (a search page's snippets).

Each client thread (opensearch-py's own connection pool, one connection per thread) sends its
share of the queries, in ``--rounds`` passes after one warm-up pass, the paths taking turns
pass by pass; latency is per request, throughput is requests answered per second of the passes.

Usage (one command; starts esbridge's local node when no --url is given; without ``--dataset`` the
SciFact sample shipped with esbridge):

    python benchmarks/bench_serve.py --distribution opensearch

Results go to ``benchmarks/results/serve-<distribution>.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from opensearchpy import OpenSearch

from esbridge.engine.client import Engine
from esbridge.nodes.provision import provision
from esbridge.rerank import Reranker

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import bench_index, engine_arguments, judged_queries, machine, ms, write_report  # noqa: E402


def run(clients: int, rounds: int, queries: list[str], one: Callable[[str], object]) -> tuple[list[float], float]:
    """Latencies (seconds) of every request and requests per second, ``clients`` threads each
    sending every ``clients``-th query ``rounds`` times."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(rounds):
                for q in queries[k::clients]:
                    t0 = time.perf_counter()
                    one(q)
                    latencies[k].append(time.perf_counter() - t0)
        except BaseException as err:  # reported below, never swallowed
            errors.append(err)

    start = time.perf_counter()
    pool = [threading.Thread(target=work, args=(k,)) for k in range(clients)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    took = time.perf_counter() - start
    if errors:
        raise errors[0]
    flat = [x for part in latencies for x in part]
    return flat, len(flat) / took


def start_server(url: str, index: str, window: int, folder: Path) -> tuple[subprocess.Popen[str], str]:
    """``esbridge serve`` in a process of its own, reranking ``index``; the process and its URL."""
    config = folder / "serve.json"
    config.write_text(json.dumps({"indices": {index: {"scorer": "evolved", "window": window}}}))
    proc = subprocess.Popen([sys.executable, "-m", "esbridge.cli", "serve", "--url", url, "--port", "0",
                             "--config", str(config), "--max-concurrency", "64"],
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        found = re.search(r"listening on (http://\S+)", line)
        if found:
            # the access log goes on being written: read it away so the server never blocks on it
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, found.group(1)
    raise SystemExit(f"esbridge serve did not start (exit code {proc.wait()})")


def start_relay(url: str) -> tuple[subprocess.Popen[str], str]:
    """``byte_relay.py`` in a process of its own, copying bytes to the engine at ``url``; the process and its URL."""
    where = url.split("://", 1)[1].rstrip("/")
    proc = subprocess.Popen([sys.executable, str(HERE / "byte_relay.py"), where], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.match(r"listening on (\d+)", line)
    if not found:
        raise SystemExit(f"byte_relay.py did not start (exit code {proc.wait()})")
    return proc, f"http://127.0.0.1:{found.group(1)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", help="BEIR-layout folder (default: the SciFact sample shipped with esbridge)")
    engine_arguments(ap)
    ap.add_argument("--clients", default="1,8", help="concurrent clients (default 1,8)")
    ap.add_argument("--rounds", type=int, default=6, help="passes over the queries per path (default 6)")
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--note", default="", help="a sentence on the machine's load, put under the machine line")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    prov = provision(args.distribution, url=args.url, use_docker=False, progress=True)
    engine = Engine.connect(prov.options())
    with tempfile.TemporaryDirectory() as tmp:
        if args.dataset:
            folder = Path(args.dataset)
        else:
            from esbridge.demo import materialise_sample

            folder = materialise_sample(Path(tmp)).path
        queries = judged_queries(folder, args.queries)
        index, expected = bench_index(engine, folder / "corpus.jsonl")
        name = folder.resolve().name
        rr = Reranker(engine, index, scorer="evolved", window=args.window)
        field = rr.layout.subfield(rr.layout.combined, "base")  # type: ignore[union-attr]
        proc, server_url = start_server(prov.url, index, args.window, Path(tmp))
        relay_proc, relay_url = start_relay(prov.url)
        try:
            max_clients = max(int(c) for c in args.clients.split(","))
            direct = OpenSearch(hosts=[prov.url], pool_maxsize=max_clients)
            served = OpenSearch(hosts=[server_url], pool_maxsize=max_clients, timeout=120)
            relayed = OpenSearch(hosts=[relay_url], pool_maxsize=max_clients)

            def engine_query(q: str) -> object:
                return direct.search(index=index, body={"size": 10, "query": {"match": {field: q}}})

            def relay_query(q: str) -> object:
                return relayed.search(index=index, body={"size": 10, "query": {"match": {field: q}}})

            def passed(q: str) -> object:
                return served.search(index=index, body={"size": 10, "query": {"match": {field: q}},
                                                        "ext": {"esbridge": {"rerank": False}}})

            def python_api(q: str) -> object:
                return rr.search(q, size=10)

            def server(q: str) -> object:
                return served.search(index=index, body={"size": 10, "query": {"match": {"text": q}}})

            highlight = {"fields": {"text": {}}}

            def engine_highlighted(q: str) -> object:
                return direct.search(index=index, body={"size": 10, "query": {"match": {"text": q}},
                                                        "highlight": highlight})

            def server_highlighted(q: str) -> object:
                return served.search(index=index, body={"size": 10, "query": {"match": {"text": q}},
                                                        "highlight": highlight})

            # the server ranks as the Python API does
            for q in queries[:5]:
                a = [h["_id"] for h in server(q)["hits"]["hits"]]  # type: ignore[index]
                b = [h["_id"] for h in rr.search(q, size=10)["hits"]["hits"]]
                assert a == b, f"the server's ranking of {q!r} differs from the Python API's"
            load = os.getloadavg()[0]
            ways = [("engine (BM25, direct)", engine_query), ("engine through a byte relay", relay_query),
                    ("passed through the server", passed),
                    ("Python API (Reranker.search)", python_api), ("server (reranked)", server),
                    ("engine, highlighted (`match` on `text`)", engine_highlighted),
                    ("server (reranked), highlighted", server_highlighted)]
            for _, one in ways:  # warm: every candidate's term vectors fetched once, connections open
                for q in queries:
                    one(q)
            rows: list[str] = []
            for clients in (int(c) for c in args.clients.split(",")):
                # the ways take turns, one pass each, so that a change of the machine's load over the run
                # falls on all of them alike
                latencies: dict[str, list[float]] = {label: [] for label, _ in ways}
                seconds = dict.fromkeys(latencies, 0.0)
                for _ in range(args.rounds):
                    for label, one in ways:
                        lat, rate = run(clients, 1, queries, one)
                        latencies[label] += lat
                        seconds[label] += len(lat) / rate
                for label, lat in latencies.items():
                    rows.append(f"| {clients} | {label} | {ms(lat, 50):.1f} | {ms(lat, 95):.1f} | "
                                f"{len(lat) / seconds[label]:.1f} |")
                    print(rows[-1], file=sys.stderr)
            lines = [f"# esbridge serve: {engine.info.label}", "",
                     f"Machine: {machine()}. Engine: {engine.info.label} (local node, same machine); the server "
                     "a process of its own on the same machine; the clients threads of this process.",
                     "", f"Load average (1 min) of the machine: {load:.1f} at the start, {os.getloadavg()[0]:.1f} at "
                     f"the end, on {os.cpu_count()} cores.{' ' + args.note if args.note else ''}", "",
                     f"Collection: {name} ({expected} documents, {len(queries)} judged queries), evolved, window "
                     f"{args.window}, top 10; {args.rounds} passes over the queries after a warm-up pass (term vectors "
                     "in the reranker's cache), the paths taking turns pass by pass. The byte relay "
                     "(`benchmarks/byte_relay.py`, a process of its own) copies the engine search's bytes both ways "
                     "and does nothing else: the cost of one hop through a Python process. The last two rows add "
                     "`highlight` on `text` to the application's search: the engine's own, and through the "
                     "server (the top 100 reranked, the page's 10 hits highlighted).", "",
                     f"Command: `python benchmarks/bench_serve.py --distribution {args.distribution}"
                     f"{f' --dataset <path to {name}>' if args.dataset else ''}`", "",
                     "| clients | path | p50 ms | p95 ms | requests/s |", "|---:|---|---:|---:|---:|", *rows]
        finally:
            for p in (proc, relay_proc):
                p.terminate()
                p.wait(60)
    rr.close()
    write_report("\n".join(lines), Path(args.out) if args.out else HERE / "results" / f"serve-{args.distribution}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
