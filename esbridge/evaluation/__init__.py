"""Measuring esbridge on test collections.

- :mod:`~esbridge.evaluation.datasets`: BEIR-layout collections, splits and fixed halves;
- :mod:`~esbridge.evaluation.download`: BEIR archives fetched, verified and extracted into the cache;
- :mod:`~esbridge.evaluation.indexing`: evaluation indices reused while their content matches;
- :mod:`~esbridge.evaluation.metrics`: trec_eval measures through ir-measures, and a fast judge;
- :mod:`~esbridge.evaluation.runner`: the engine's BM25 baselines and the rerankers, query by query;
- :mod:`~esbridge.evaluation.report`: run files, tables, JSON and plots;
- :mod:`~esbridge.evaluation.significance`: paired tests, Holm–Bonferroni, confidence intervals;
- :mod:`~esbridge.evaluation.trecfiles`: the user's topics, judgments and run files;
- :mod:`~esbridge.evaluation.batch`: topics ranked into a TREC run file, resumably;
- :mod:`~esbridge.evaluation.tune`: parameter search on features fetched once;
- :mod:`~esbridge.evaluation.ltr`: every candidate's features for learning to rank.

The optional dependencies (ir-measures, matplotlib, optuna, scipy: ``pip install 'esbridge[eval]'``)
are imported only when they are used.
"""

from esbridge.evaluation.datasets import BeirDataset, DatasetError, Query, SplitSpec, load_dataset
from esbridge.evaluation.metrics import MEASURES, combined_score, mean_metrics, per_query_metrics
from esbridge.evaluation.runner import EvalConfig, EvalResult, run_evaluation

__all__ = [
    "MEASURES",
    "BeirDataset",
    "DatasetError",
    "EvalConfig",
    "EvalResult",
    "Query",
    "SplitSpec",
    "combined_score",
    "load_dataset",
    "mean_metrics",
    "per_query_metrics",
    "run_evaluation",
]
