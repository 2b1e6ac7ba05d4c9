#!/usr/bin/env bash
# Re-create benchmarks/results/<dataset>/ (OpenSearch), <dataset>/heldout/ and elasticsearch/<dataset>/
# for the five test collections, with the shipped defaults (the scorers and the hybrid pipeline's
# systems: semantic, keyword, hybrid), then summary.md.
# Run from the project root, with ESBRIDGE_DATA set to the folder holding the BEIR-layout
# collections.  Run files are kept gzip-compressed and cut at rank 100 to keep the repository small
# (per_query.tsv holds every measure of every query; drop --runs/--run-depth for full 1000-deep runs).
set -euo pipefail
URL="${ESBRIDGE_URL:-http://127.0.0.1:9201}"
ES_URL="${ESBRIDGE_ES_URL:-http://127.0.0.1:9202}"
DATA="${ESBRIDGE_DATA:?set ESBRIDGE_DATA to the folder holding the BEIR-layout collections}"
for ds in scifact nfcorpus cranfield cisi med; do
  esbridge eval --dataset "$DATA/$ds" --scorers bm25,bmx,evolved --split test --window 1000 \
    --url "$URL" --out "benchmarks/results/$ds" --runs gz --run-depth 100 --quiet
done
# the held-out halves: the test queries the tuning of the shipped defaults never saw
for ds in nfcorpus cranfield cisi med; do
  esbridge eval --dataset "$DATA/$ds" --scorers bm25,bmx,evolved --split test:heldout --window 1000 \
    --url "$URL" --out "benchmarks/results/$ds/heldout" --runs none --quiet
done
# the same on Elasticsearch
for ds in scifact nfcorpus cranfield cisi med; do
  esbridge eval --dataset "$DATA/$ds" --scorers bm25,bmx,evolved --split test --window 1000 \
    --url "$ES_URL" --out "benchmarks/results/elasticsearch/$ds" --runs none --quiet
done
python benchmarks/summarize.py > benchmarks/results/summary.md
# the levers against the engines' own hybrid rows (reuses the evaluation indices and vectors built above)
python benchmarks/engine_hybrid_levers.py --data "$DATA" --url "$URL"
# the README's and the docs' results tables, from the results.json files just written
python benchmarks/doc_tables.py --write
