"""esbridge's BMX against the paper's reference implementation, baguetter 0.1.1.

Both sides get identical token lists from the shipped SciFact sample (its first 500
documents, title + text, and its first 20 judged claims, split with a plain lowercase
alphanumeric regex; this tokenisation is test input only, the product gets its tokens from
the engine's analyzer).  baguetter runs in its own virtualenv, built on first use under
``$ESBRIDGE_HOME/baguetter-venv`` (default ``~/.cache/esbridge/baguetter-venv``; or
``$ESBRIDGE_BAGUETTER_VENV``); the first build takes about a minute and ~700 MB of disk
(numba, scipy, scikit-learn, faiss); later runs reuse it and take a few seconds.  The run's
summary names the folder and how to remove it.

baguetter is installed with ``--no-deps`` plus the packages its BMX import path
needs: its declared dependencies include ``beir`` (which pulls sentence-transformers
and torch), ``datasets``, ``optuna`` and ``autofaiss``, none of which the sparse index
imports.  No network means the test fails with the pip output, it does not skip.

What the comparison shows (see also the module docstring of ``esbridge.scoring.bmx``):

1. With ``entropy_over_matched_terms=True, drop_absent_terms=True`` (baguetter's
   reading), every score agrees (median relative difference ~6e-8, at most ~7e-7
   absolute: baguetter computes IDF in float32), including queries with repeated
   tokens: both count a repeated token per occurrence.
2. The paper's reading (the defaults) differs in two places, each checked exactly
   (to the same float32 tolerance):
   - ``β E(q_i) S(Q, D)`` summed over all query tokens (eq. 2 as written) instead of
     only the tokens the document contains: the difference is
     ``β S(Q, D) Σ_{q_i not in D} E(q_i)``;
   - a token absent from the index still counts in ``m`` (lower ``Ē`` and ``S``):
     scores agree exactly on queries without such tokens and differ on the others.
3. Normalised BMX: baguetter divides by ``m ln(1 + (N - 0.5)/1.5)`` (no ``+ 1``, the
   BM25 bound of appendix B) where eq. 10 has ``m (ln(1 + (N - 0.5)/1.5) + 1)``.
4. WQA: eq. 9 adds separately scored queries; baguetter's ``search_weighted`` scores
   one merged query (``E``, ``Ē``, ``S`` over the tokens of all queries together).
   esbridge's WQA equals eq. 9 applied to baguetter's own single-query scores, and
   differs from ``search_weighted``.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from esbridge.scoring import ChannelArrays, ScoringInput, get_scorer
from esbridge.scoring.bmx import BMXParams, collection_entropy, weighted_query_augmentation
from tests.conftest import summary_note
from tests.data import documents, judged_queries

N_DOCS = 500
N_QUERIES = 20
VENV_ENV = "ESBRIDGE_BAGUETTER_VENV"
RUNNER = Path(__file__).with_name("baguetter_bmx_runner.py")
BAGUETTER = "baguetter==0.1.1"
# What `import baguetter` needs (its package __init__ imports the dense indices too).
RUNTIME_DEPS = [
    "numpy",
    "numba",
    "scipy",
    "scikit-learn",
    "tqdm",
    "nltk",
    "KrovetzStemmer",
    "PyStemmer",
    "Unidecode",
    "python-dotenv",
    "fsspec",
    "huggingface_hub",
    "faiss-cpu",
    "usearch",
]
COMPLETE_MARKER = ".esbridge-complete"
BUILDING_MARKER = ".esbridge-building"
# baguetter computes IDF in float32 arithmetic: `1 + x` with small `x` (common terms)
# loses digits, so its IDF is off by up to ~3e-7 absolute per token (a relative error of
# up to ~1e-5 for the commonest terms), times at most α + 1 = 2.5 from the saturation.
# Hence an absolute tolerance per query token on top of a relative one.
RTOL = 1e-6
ATOL_PER_TOKEN = 1e-6


def atol_for(*queries: list[str]) -> float:
    return ATOL_PER_TOKEN * sum(len(q) for q in queries)


BAGUETTER_READING = BMXParams(entropy_over_matched_terms=True, drop_absent_terms=True)
PAPER_READING = BMXParams(entropy_over_matched_terms=False)


# ---------------------------------------------------------------------------
# The reference venv
# ---------------------------------------------------------------------------


def _python_of(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        pytest.fail(
            f"building the baguetter reference venv failed at: {what}\n"
            f"command: {' '.join(cmd)}\n--- stdout ---\n{proc.stdout[-3000:]}\n"
            f"--- stderr ---\n{proc.stderr[-3000:]}\n"
            f"pip must reach PyPI, or set {VENV_ENV} to a venv that has {BAGUETTER} and "
            f"{' '.join(RUNTIME_DEPS)} installed.",
            pytrace=False,
        )


def _has_baguetter(python: Path) -> bool:
    check = "from importlib.metadata import version; import baguetter; assert version('baguetter') == '0.1.1'"
    if not python.exists():
        return False
    return subprocess.run([str(python), "-c", check], capture_output=True, timeout=300).returncode == 0


@pytest.fixture(scope="module")
def baguetter_python() -> Path:
    """The venv's python: ours if complete, a given one if it has baguetter 0.1.1, else built."""
    venv = Path(os.environ.get(VENV_ENV, str(default_venv()))).expanduser()
    if os.environ.get(VENV_ENV):
        where = f"the BMX reference implementation ({BAGUETTER}) runs in {venv} (${VENV_ENV})"
    else:
        where = (f"the BMX reference implementation ({BAGUETTER}) runs in a virtual environment of the tests, "
                 f"{venv} (about 700 MB, kept for the next run); remove it with: rm -rf {venv}")
    print(where)
    summary_note(where)
    venv.parent.mkdir(parents=True, exist_ok=True)
    # One build at a time: a second run waits for the first instead of deleting its half-built venv.
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _venv_python(venv)


def default_venv() -> Path:
    """Under ``$ESBRIDGE_HOME`` (default ``~/.cache/esbridge``), like esbridge's other downloads."""
    from esbridge.home import cache_dir

    return cache_dir() / "baguetter-venv"


def _venv_python(venv: Path) -> Path:
    python = _python_of(venv)
    if (venv / COMPLETE_MARKER).exists() or _has_baguetter(python):
        return python
    if venv.exists():
        if not (venv / BUILDING_MARKER).exists():
            pytest.fail(
                f"{venv} exists but has no working {BAGUETTER}; it was not made by this test, so it is "
                f"left alone. Point {VENV_ENV} elsewhere or remove it.",
                pytrace=False,
            )
        shutil.rmtree(venv)  # an interrupted build of ours (we hold the lock, so nobody is building it)
    _run([sys.executable, "-m", "venv", str(venv)], "python -m venv")
    (venv / BUILDING_MARKER).write_text("")
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    _run([*pip, "--no-deps", BAGUETTER], f"pip install --no-deps {BAGUETTER}")
    _run([*pip, *RUNTIME_DEPS], "pip install of baguetter's import-time dependencies")
    (venv / COMPLETE_MARKER).write_text(BAGUETTER + "\n")
    (venv / BUILDING_MARKER).unlink()
    return python


# ---------------------------------------------------------------------------
# Identical token lists on both sides
# ---------------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


@dataclass(frozen=True)
class Collection:
    docs: list[list[str]]
    counts: list[Counter[str]]
    doc_len: np.ndarray
    df: dict[str, int]
    entropy: dict[str, float]

    @property
    def n_docs(self) -> int:
        return len(self.docs)

    def channel(self, query: list[str]) -> ChannelArrays:
        """The base channel of ``query`` with every document of the collection a candidate."""
        terms = tuple(dict.fromkeys(query))
        qtf = Counter(query)
        tf = np.array([[c.get(t, 0) for t in terms] for c in self.counts], dtype=np.float64)
        return ChannelArrays(
            terms=terms,
            qtf=np.array([qtf[t] for t in terms], dtype=np.float64),
            df=np.array([self.df.get(t, 0) for t in terms], dtype=np.float64),
            n_docs=self.n_docs,
            tf=tf.reshape(self.n_docs, len(terms)),
            doc_len=self.doc_len,
            avgdl=float(self.doc_len.mean()),
            entropy=np.array([self.entropy.get(t, 0.0) for t in terms], dtype=np.float64),
        )

    def inputs(self, query: list[str]) -> ScoringInput:
        return ScoringInput({"base": self.channel(query)})


@pytest.fixture(scope="module")
def collection() -> Collection:
    docs = [tokenize(f"{d['title']} {d['text']}") for d in documents(N_DOCS)]
    counts = [Counter(d) for d in docs]
    postings: dict[str, list[int]] = {}
    for c in counts:
        for term, n in c.items():
            postings.setdefault(term, []).append(n)
    return Collection(
        docs=docs,
        counts=counts,
        doc_len=np.array([len(d) for d in docs], dtype=np.float64),
        df={t: len(v) for t, v in postings.items()},
        entropy={t: collection_entropy(np.array(v, dtype=np.float64)) for t, v in postings.items()},
    )


@pytest.fixture(scope="module")
def queries(collection: Collection) -> list[list[str]]:
    claims = [tokenize(q["text"]) for q in judged_queries(limit=N_QUERIES)]
    # Queries with repeated tokens: each claim followed by its first two tokens again.
    repeated = [q + q[:2] for q in claims[:5]]
    return claims + repeated


@pytest.fixture(scope="module")
def wqa_cases(queries: list[list[str]]) -> list[tuple[list[list[str]], list[float]]]:
    # Original query, then two "augmentations" taken from other claims.
    return [([queries[i], queries[i + 1], queries[i + 2][:4]], [1.0, 0.5, 0.3]) for i in range(5)]


@pytest.fixture(scope="module")
def reference(
    baguetter_python: Path,
    collection: Collection,
    queries: list[list[str]],
    wqa_cases: list[tuple[list[list[str]], list[float]]],
) -> dict[str, Any]:
    """baguetter's scores: ``scores``/``normalized`` row ``i`` is ``queries[i]``, then the
    WQA queries not among them; ``weighted`` row ``i`` is ``wqa_cases[i]``; ``by_query``
    maps each query (as JSON) to its scores."""
    extra = [q for qs, _ in wqa_cases for q in qs if q not in queries]
    request: dict[str, Any] = {
        "corpus": collection.docs,
        "queries": queries + extra,
        "weighted": [{"queries": qs, "weights": ws} for qs, ws in wqa_cases],
    }
    proc = subprocess.run(
        [str(baguetter_python), str(RUNNER)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        pytest.fail(f"the baguetter runner failed:\n{proc.stderr[-5000:]}", pytrace=False)
    out: dict[str, Any] = json.loads(proc.stdout)
    out["by_query"] = {json.dumps(q): s for q, s in zip(request["queries"], out["scores"])}
    return out


def _ours(collection: Collection, query: list[str], params: BMXParams, name: str = "bmx") -> np.ndarray:
    return get_scorer(name).score(collection.inputs(query), params).scores


def _has_absent_token(collection: Collection, query: list[str]) -> bool:
    return any(t not in collection.df for t in query)


# ---------------------------------------------------------------------------
# The comparisons
# ---------------------------------------------------------------------------


def test_reference_is_baguetter_0_1_1(reference: dict[str, Any]) -> None:
    assert reference["version"] == "0.1.1"


def test_agrees_with_baguetter_under_its_reading(
    reference: dict[str, Any], collection: Collection, queries: list[list[str]]
) -> None:
    ours = np.array([_ours(collection, q, BAGUETTER_READING) for q in queries])
    theirs = np.array(reference["scores"][: len(queries)])
    assert ours.shape == theirs.shape == (len(queries), N_DOCS)
    # Make sure the case is not vacuous: every query scores some documents.
    assert np.all((theirs > 0).sum(axis=1) > 0)
    atol = np.array([atol_for(q) for q in queries])[:, None]
    close = np.isclose(ours, theirs, rtol=RTOL, atol=atol)
    max_abs = float(np.max(np.abs(ours - theirs)))
    assert close.all(), f"{(~close).sum()} of {close.size} scores differ; max abs diff {max_abs:.3g}"
    # Repeated tokens are part of this set (the last 5 queries) and agree too.
    assert any(len(set(q)) < len(q) for q in queries[-5:])


def test_paper_similarity_term_sums_entropy_over_all_query_tokens(
    reference: dict[str, Any], collection: Collection, queries: list[list[str]]
) -> None:
    # Only the first difference: OOV tokens dropped as baguetter does.
    params = BMXParams(entropy_over_matched_terms=False, drop_absent_terms=True)
    n_changed = 0
    for q, theirs in zip(queries, reference["scores"][: len(queries)]):
        arrays = collection.channel(q)
        result = get_scorer("bmx").score(ScoringInput({"base": arrays}), params)
        matched = get_scorer("bmx").score(ScoringInput({"base": arrays}), BAGUETTER_READING)
        # The paper adds β S Σ_{q_i not in D} E(q_i) on top of baguetter's score.
        expected_gap = result.parts["entropy_similarity"] - matched.parts["entropy_similarity"]
        np.testing.assert_allclose(result.scores - expected_gap, theirs, rtol=RTOL, atol=atol_for(q))
        n_changed += int(np.sum(~np.isclose(result.scores, theirs, rtol=RTOL, atol=atol_for(q))))
    assert n_changed > 0


def test_paper_counts_absent_tokens_in_m(
    reference: dict[str, Any], collection: Collection, queries: list[list[str]]
) -> None:
    params = BMXParams(entropy_over_matched_terms=True, drop_absent_terms=False)
    with_absent = 0
    for q, theirs in zip(queries, reference["scores"][: len(queries)]):
        ours = _ours(collection, q, params)
        if _has_absent_token(collection, q):
            with_absent += 1
            assert not np.allclose(ours, theirs, rtol=RTOL, atol=atol_for(q))
        else:
            np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=atol_for(q))
    assert 0 < with_absent < len(queries)


def test_paper_reading_disagreement_is_quantified(
    reference: dict[str, Any], collection: Collection, queries: list[list[str]]
) -> None:
    ours = np.array([_ours(collection, q, PAPER_READING) for q in queries])
    theirs = np.array(reference["scores"][: len(queries)])
    # Documents matching no query token score 0 on both sides.
    zero = theirs == 0
    assert np.all(ours[zero] == 0)
    # The paper reading never scores below baguetter's when no token is absent from the
    # index (it only adds entropy of unmatched tokens); rankings stay close: the top-10
    # sets overlap by at least half on every query.
    for q, a, b in zip(queries, ours, theirs):
        if not _has_absent_token(collection, q):
            assert np.all(a >= b - atol_for(q))
        top_a = set(np.argsort(-a, kind="stable")[:10])
        top_b = set(np.argsort(-b, kind="stable")[:10])
        assert len(top_a & top_b) >= 5


def test_normalized_bmx_differs_by_the_plus_one(
    reference: dict[str, Any], collection: Collection, queries: list[list[str]]
) -> None:
    big_l = math.log1p((collection.n_docs - 0.5) / 1.5)
    for q, theirs in zip(queries, reference["normalized"][: len(queries)]):
        ours = _ours(collection, q, BAGUETTER_READING, name="bmx_normalized")
        # ours = raw / (m (L + 1)), baguetter = raw / (m L)
        np.testing.assert_allclose(ours * (big_l + 1.0) / big_l, theirs, rtol=RTOL, atol=atol_for(q) / big_l)


def test_wqa_is_eq9_not_baguetters_merged_query(
    reference: dict[str, Any],
    collection: Collection,
    wqa_cases: list[tuple[list[list[str]], list[float]]],
) -> None:
    bmx = get_scorer("bmx")
    for (qs, ws), merged in zip(wqa_cases, reference["weighted"]):
        original, *augmented = [collection.inputs(q) for q in qs]
        ours = weighted_query_augmentation(bmx, original, list(zip(ws[1:], augmented)), BAGUETTER_READING)
        # eq. 9 applied to baguetter's own single-query scores
        singles = [np.array(reference["by_query"][json.dumps(q)]) for q in qs]
        eq9 = singles[0] + sum(w * s for w, s in zip(ws[1:], singles[1:]))
        np.testing.assert_allclose(ours.scores, eq9, rtol=RTOL, atol=atol_for(*qs))
        # baguetter's search_weighted merges the queries into one and scores something else
        assert not np.allclose(ours.scores, np.array(merged), rtol=RTOL, atol=atol_for(*qs))


def test_reference_venv_lives_under_esbridge_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ESBRIDGE_HOME", str(tmp_path))
    assert default_venv() == tmp_path / "baguetter-venv"
