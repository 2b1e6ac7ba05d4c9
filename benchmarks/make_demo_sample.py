"""Build the SciFact sample that ``esbridge demo`` runs on without arguments.

The sample is deterministic: the first ``--queries`` judged test queries by numeric id,
every document judged for them, and further documents of the corpus drawn with a fixed
seed until the corpus holds ``--docs`` documents (kept in the corpus's own order).  It is
written in BEIR layout under ``esbridge/resources/demo/scifact-sample/``: ``corpus.jsonl.gz``
(gzip without a timestamp, so the same input gives the same bytes), ``queries.jsonl`` and
``qrels/test.tsv``.

    python benchmarks/make_demo_sample.py --source PATH/TO/scifact

SciFact (Wadden et al., EMNLP 2020) is redistributed under the terms of its release; see
``esbridge/resources/demo/scifact-sample/README.md``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "esbridge" / "resources" / "demo" / "scifact-sample"


def _key(doc_id: str) -> tuple[int, str]:
    return (int(doc_id), doc_id) if doc_id.isdigit() else (1 << 62, doc_id)


def build(source: Path, out: Path, *, n_queries: int, n_docs: int, seed: int) -> dict[str, int]:
    qrels: dict[str, dict[str, int]] = {}
    with open(source / "qrels" / "test.tsv", encoding="utf-8") as f:
        next(f)  # header
        for line in f:
            if not line.strip():
                continue
            qid, did, score = line.rstrip("\n").split("\t")[:3]
            qrels.setdefault(qid, {})[did] = int(float(score))
    chosen = sorted(qrels, key=_key)[:n_queries]
    judged = {d for q in chosen for d in qrels[q]}

    docs: list[dict[str, str]] = []
    with open(source / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                docs.append(json.loads(line))
    ids = [str(d["_id"]) for d in docs]
    missing = judged - set(ids)
    if missing:
        raise SystemExit(f"judged documents not in the corpus: {sorted(missing)[:5]}")
    others = sorted((i for i in ids if i not in judged), key=_key)
    extra = random.Random(seed).sample(others, max(0, n_docs - len(judged)))
    keep = judged | set(extra)

    out.mkdir(parents=True, exist_ok=True)
    (out / "qrels").mkdir(exist_ok=True)
    body = "".join(json.dumps({"_id": str(d["_id"]), "title": d.get("title", ""), "text": d.get("text", "")},
                              ensure_ascii=False) + "\n"
                   for d in docs if str(d["_id"]) in keep)
    with open(out / "corpus.jsonl.gz", "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
            gz.write(body.encode("utf-8"))

    queries = {}
    with open(source / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                q = json.loads(line)
                queries[str(q["_id"])] = str(q["text"])
    with open(out / "queries.jsonl", "w", encoding="utf-8") as f:
        for qid in chosen:
            f.write(json.dumps({"_id": qid, "text": queries[qid]}, ensure_ascii=False) + "\n")
    with open(out / "qrels" / "test.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for qid in chosen:
            for did in sorted(qrels[qid], key=_key):
                f.write(f"{qid}\t{did}\t{qrels[qid][did]}\n")
    return {"queries": len(chosen), "judged documents": len(judged), "documents": len(keep)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, required=True, help="SciFact in BEIR layout")
    ap.add_argument("--out", type=Path, default=OUT, help="where to write the sample")
    ap.add_argument("--queries", type=int, default=50, help="judged test queries (default 50)")
    ap.add_argument("--docs", type=int, default=1000, help="documents in the sample (default 1000)")
    ap.add_argument("--seed", type=int, default=2020, help="seed of the unjudged documents (default 2020)")
    args = ap.parse_args()
    counts = build(args.source, args.out, n_queries=args.queries, n_docs=args.docs, seed=args.seed)
    print(", ".join(f"{v} {k}" for k, v in counts.items()), f"written to {args.out}")


if __name__ == "__main__":
    main()
