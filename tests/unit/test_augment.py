"""Weighted query augmentation without an engine: the weighted sum on hand-made arrays, the augmenter
protocol, input checks and the augmentations file."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from esbridge.augment import (
    AugmentationSpec,
    Augmenter,
    FeedbackParams,
    check_augmentations,
    merge_queries,
    read_augmentations,
    resolve_augmentations,
    score_augmented,
    select_terms,
)
from esbridge.errors import ConfigurationError
from esbridge.features.termvectors import QueryChannel
from esbridge.index import IndexLayout
from esbridge.rerank import Reranker
from esbridge.scoring import get_scorer
from esbridge.scoring.arrays import ChannelArrays, FieldArrays, ScoringInput
from esbridge.scoring.bmx import BMXParams, weighted_query_augmentation
from tests.cli import run

# ---- hand-made arrays: 4 candidates, the terms a, b, c, d ------------------------------------------

TERMS = ("a", "b", "c", "d")
TF = np.array([[2.0, 0.0, 1.0, 0.0],
               [0.0, 3.0, 0.0, 1.0],
               [1.0, 1.0, 0.0, 0.0],
               [0.0, 0.0, 4.0, 2.0]])
DF = np.array([10.0, 3.0, 50.0, 0.0])       # d is absent from the index
ENTROPY = np.array([2.5, 0.9, 7.0, 0.0])
DOC_LEN = np.array([12.0, 30.0, 7.0, 22.0])
TITLE_TF = np.array([[1.0, 0.0, 0.0, 0.0],
                     [0.0, 1.0, 0.0, 0.0],
                     [0.0, 0.0, 0.0, 0.0],
                     [0.0, 0.0, 2.0, 1.0]])


def _channel(terms: tuple[str, ...], qtf: tuple[int, ...]) -> ChannelArrays:
    """The arrays of a query made of ``terms`` (a subset of TERMS), built directly."""
    idx = [TERMS.index(t) for t in terms]
    title_tf = TITLE_TF[:, idx]
    return ChannelArrays(
        terms=terms, qtf=np.array(qtf, dtype=np.float64), df=DF[idx], n_docs=200, tf=TF[:, idx],
        doc_len=DOC_LEN, avgdl=18.0, entropy=ENTROPY[idx], unique_terms=np.array([5.0, 9.0, 4.0, 7.0]),
        fields={"title": FieldArrays(tf=title_tf, doc_len=np.array([3.0, 4.0, 2.0, 5.0]), avgdl=3.5),
                "text": FieldArrays(tf=TF[:, idx] - title_tf, doc_len=DOC_LEN - np.array([3.0, 4.0, 2.0, 5.0]),
                                    avgdl=14.5)})


def _input(query: dict[str, int]) -> ScoringInput:
    return ScoringInput(channels={"base": _channel(tuple(query), tuple(query.values()))})


def _qc(query: dict[str, int]) -> dict[str, QueryChannel]:
    return {"base": QueryChannel(tuple(query), tuple(query.values()))}


ORIGINAL = {"a": 1, "b": 2}
VARIANT_1 = {"c": 2, "a": 1, "d": 1}
VARIANT_2 = {"b": 1}


@pytest.mark.parametrize("scorer", ["bmx", "bm25", "bmx_normalized", "bm25f_pubmed"])
def test_weighted_sum_from_the_merged_features_equals_the_wqa_function(scorer: str) -> None:
    sc = get_scorer(scorer)
    merged = merge_queries([_qc(ORIGINAL), _qc(VARIANT_1), _qc(VARIANT_2)])
    assert merged["base"].terms == ("a", "b", "c", "d") and merged["base"].qtf == (2, 3, 2, 1)
    union = _input(dict(zip(merged["base"].terms, merged["base"].qtf)))
    got = score_augmented(sc, None, union, _qc(ORIGINAL), [(_qc(VARIANT_1), 0.5), (_qc(VARIANT_2), 0.25)])
    want = weighted_query_augmentation(sc, _input(ORIGINAL), [(0.5, _input(VARIANT_1)), (0.25, _input(VARIANT_2))])
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-13, atol=0)
    for part in ("original", "augmented_1", "augmented_2", "augmentation"):
        np.testing.assert_allclose(got.parts[part], want.parts[part], rtol=1e-13, atol=0)
    # and the sum is the one of the paper's equation 9, query by query
    by_hand = (sc.score(_input(ORIGINAL)).scores + 0.5 * sc.score(_input(VARIANT_1)).scores
               + 0.25 * sc.score(_input(VARIANT_2)).scores)
    np.testing.assert_allclose(got.scores, by_hand, rtol=1e-13, atol=0)
    assert np.any(want.parts["augmentation"] > 0)


def test_bm25_weighted_sum_worked_by_hand() -> None:
    # Lucene BM25 (k1 = 0.9, b = 0.4, no (k1 + 1) factor) of candidate 0, worked out term by term
    params = get_scorer("bm25").make_params(k1=0.9, b=0.4)

    def term(tf: float, df: float) -> float:
        idf = math.log(1 + (200 - df + 0.5) / (df + 0.5))
        return idf * tf / (tf + 0.9 * (1 - 0.4 + 0.4 * 12.0 / 18.0))

    original = 1 * term(2.0, 10.0) + 2 * 0.0   # a (qtf 1, tf 2) and b (qtf 2, tf 0)
    variant = 2 * term(1.0, 50.0) + term(2.0, 10.0)  # c (qtf 2, tf 1), a (tf 2); d has tf 0
    merged = _input({"a": 2, "b": 2, "c": 1, "d": 1})
    got = score_augmented(get_scorer("bm25"), params, merged, _qc(ORIGINAL), [(_qc(VARIANT_1), 0.5)],
                          original_weight=2.0)
    assert got.scores[0] == pytest.approx(2.0 * original + 0.5 * variant, rel=1e-12)


def test_select_terms_keeps_the_candidates_and_takes_the_columns() -> None:
    union = _input({"a": 1, "b": 1, "c": 1, "d": 1})
    got = select_terms(union, {"base": QueryChannel(("d", "a"), (3, 1))}).channel("base")
    assert got.terms == ("d", "a") and list(got.qtf) == [3.0, 1.0]
    np.testing.assert_array_equal(got.tf, TF[:, [3, 0]])
    np.testing.assert_array_equal(got.df, DF[[3, 0]])
    np.testing.assert_array_equal(got.fields["title"].tf, TITLE_TF[:, [3, 0]])
    assert got.entropy is not None and list(got.entropy) == [0.0, 2.5]
    np.testing.assert_array_equal(got.doc_len, DOC_LEN)
    with pytest.raises(ValueError, match="not in the input"):
        select_terms(_input({"a": 1}), _qc({"b": 1}))
    with pytest.raises(ValueError, match="no channel 'base'"):
        select_terms(union, {"prefix": QueryChannel(("a",), (1,))})


def test_original_weight_scales_the_query_and_zero_variants_change_nothing() -> None:
    sc = get_scorer("bmx")
    alone = sc.score(_input(ORIGINAL), BMXParams()).scores
    none = score_augmented(sc, BMXParams(), _input(ORIGINAL), _qc(ORIGINAL), [])
    np.testing.assert_array_equal(none.scores, alone)
    double = score_augmented(sc, BMXParams(), _input(ORIGINAL), _qc(ORIGINAL), [], original_weight=2)
    np.testing.assert_allclose(double.scores, 2 * alone, rtol=1e-15)
    with pytest.raises(ConfigurationError, match="original_weight must be a finite number >= 0"):
        score_augmented(sc, None, _input(ORIGINAL), _qc(ORIGINAL), [], original_weight=-1)
    with pytest.raises(ValueError, match="original_weight must be finite"):
        weighted_query_augmentation(sc, _input(ORIGINAL), [], original_weight=float("nan"))


# ---- the augmenter protocol -------------------------------------------------------------------------


def synonyms(query_text: str) -> list[tuple[str, float]]:
    return [(query_text.replace("heart", "cardiac"), 0.5)] if "heart" in query_text else []


class Counting:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, query_text: str) -> list[tuple[str, float]]:
        self.calls.append(query_text)
        return [(f"{query_text} review", 0.2), ("", 0.0)]


def test_a_function_or_an_object_is_an_augmenter() -> None:
    fn: Augmenter = synonyms
    obj: Augmenter = Counting()
    assert isinstance(fn, Augmenter) and isinstance(obj, Augmenter)
    assert resolve_augmentations(fn, "heart failure") == (("cardiac failure", 0.5),)
    assert resolve_augmentations(fn, "kidney") == ()
    assert resolve_augmentations(obj, "q") == (("q review", 0.2), ("", 0.0))
    assert obj.calls == ["q"]
    assert resolve_augmentations([("x", 1)], "q") == (("x", 1.0),)


def test_an_augmenter_that_returns_nonsense_is_named() -> None:
    def broken(query_text: str) -> Any:
        return [(query_text, float("inf"))]

    with pytest.raises(ConfigurationError, match=r"augmentations returned by .*broken\[0\]: the weight must be"):
        resolve_augmentations(broken, "q")

    def not_a_list(query_text: str) -> Any:
        return "a variant"

    with pytest.raises(ConfigurationError, match="must be a list of .variant text, weight. pairs, got str"):
        resolve_augmentations(not_a_list, "q")


# ---- input checks -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "message"), [
    ("vitamin d", "augmentations must be a list of"),
    ({"vitamin": 1.0}, "augmentations must be a list of"),
    ([("vitamin", 1.0, 2)], r"augmentations\[0\] must be a \(variant text, weight\) pair"),
    ([("ok", 1), "vitamin"], r"augmentations\[1\] must be a \(variant text, weight\) pair"),
    ([(None, 1.0)], r"augmentations\[0\]: the variant text must be a string, got NoneType"),
    ([(b"bytes", 1.0)], r"augmentations\[0\]: the variant text must be a string, got bytes"),
    ([("x", -0.5)], r"augmentations\[0\]: the weight must be a finite number >= 0, got -0.5"),
    ([("x", float("nan"))], r"augmentations\[0\]: the weight must be a finite number >= 0, got nan"),
    ([("x", float("inf"))], r"augmentations\[0\]: the weight must be a finite number >= 0, got inf"),
    ([("x", True)], r"augmentations\[0\]: the weight must be a finite number >= 0, got True"),
    ([("x", "0.5")], r"augmentations\[0\]: the weight must be a finite number >= 0, got '0.5'"),
])
def test_bad_augmentations_are_refused_with_the_parameter_named(value: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        check_augmentations(value)


class NoEngine:
    """Any use of the engine fails the test: input checks come first."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the engine was used ({name}) before the input was checked")


def test_the_reranker_checks_before_it_asks_the_engine() -> None:
    rr = Reranker(NoEngine(), "idx", scorer="bm25", layout=IndexLayout())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"augmentations\[0\]: the weight must be a finite number"):
        rr.search("q", augmentations=[("x", float("nan"))])
    with pytest.raises(ConfigurationError, match="original_weight must be a finite number >= 0, got -1"):
        rr.search("q", augmentations=[], original_weight=-1)
    with pytest.raises(ConfigurationError, match=r"augmentations\[0\]: the variant text must be a string"):
        rr.rescore({"hits": {"hits": []}}, "q", augmentations=[(3, 1.0)])


def test_feedback_params_are_checked() -> None:
    assert FeedbackParams.parse(["fb_docs=5", "weight=0.25"]) == FeedbackParams(fb_docs=5, weight=0.25)
    with pytest.raises(ConfigurationError, match="has no parameter 'docs'; valid: fb_docs"):
        FeedbackParams.parse(["docs=5"])
    with pytest.raises(ConfigurationError, match="must look like NAME=VALUE"):
        FeedbackParams.parse(["fb_docs"])
    with pytest.raises(ConfigurationError, match="fb_terms must be an integer >= 1, got 0"):
        FeedbackParams(fb_terms=0)
    with pytest.raises(ConfigurationError, match="weight must be a finite number >= 0"):
        FeedbackParams(weight=-1.0)
    with pytest.raises(ConfigurationError, match="unknown augmenter 'llm'"):
        AugmentationSpec(augmenter="llm")
    with pytest.raises(ConfigurationError, match="original_weight must be a finite number >= 0"):
        AugmentationSpec(augmenter="prf", original_weight=float("inf"))


# ---- the augmentations file -------------------------------------------------------------------------


def test_json_and_json_lines_files_are_read(tmp_path: Path) -> None:
    doc = tmp_path / "aug.json"
    doc.write_text(json.dumps({"1": [["heart attack", 0.5], ["myocardial infarction", 1]],
                               "vitamin d": []}, indent=2))
    assert read_augmentations(doc) == {"1": (("heart attack", 0.5), ("myocardial infarction", 1.0)), "vitamin d": ()}
    lines = tmp_path / "aug.jsonl"
    lines.write_text('{"1": [["heart attack", 0.5]]}\n\n{"2": [["bone", 0.1]], "3": []}\n')
    assert read_augmentations(lines) == {"1": (("heart attack", 0.5),), "2": (("bone", 0.1),), "3": ()}
    spec = AugmentationSpec.from_file(lines, original_weight=2.0)
    variants = spec.bind(None)  # type: ignore[arg-type]  # no shipped augmenter: no reranker needed
    assert variants("2", "anything") == (("bone", 0.1),)
    assert variants("9", "1") == (("heart attack", 0.5),)  # by text when the id is unknown
    assert variants("9", "other") is None
    assert spec.unused_keys([("1", "x"), ("5", "3")]) == ["2"]
    assert spec.describe()["file"] == "aug.jsonl" and len(spec.describe()["sha256"]) == 64


@pytest.mark.parametrize(("text", "message"), [
    ("", "the file is empty"),
    ("\n  \n", "the file is empty"),
    ('{"1": [["a", 1]]}\n{"2": [["b", 1],]}\n', "line 2: not valid JSON"),
    ('{\n  "1": [["a", 1]],\n  "2": [["b" 1]]\n}\n', "line 3: not valid JSON"),
    ('{\n  "1": [["a", 1]],\n  "2": [["b", -1]]\n}\n', "line 3: query '2': pair 1: the weight must be a finite "
                                                       "number >= 0, got -1"),
    ('{\n  "1": [["a", 1]],\n  "2": [["b", NaN]]\n}\n', "line 3: query '2': pair 1: the weight must be"),
    ('{"1": [["a", 1]]}\n{"2": [["b"]]}\n', r"line 2: query '2': pair 1 must be \[variant, weight\]"),
    ('{"1": [["a", 1]]}\n{"2": [[7, 1]]}\n', "line 2: query '2': pair 1: the variant must be a string, got 7"),
    ('{"1": {"a": 1}}\n', r"line 1: query '1': expected a list of \[variant, weight\] pairs"),
    ('{"1": [["a", 1]]}\n{"1": [["b", 1]]}\n', "line 2: query '1' is already given on line 1"),
    ('{"1": [["a", 1]], "1": []}\n', "line 1: query '1' is given twice on this line"),
    ('{\n  "1": [["a", 1]],\n  "1": []\n}\n', "line 2: query '1' is given more than once"),
    ('[["a", 1]]\n', "line 1: expected a JSON object mapping query ids or texts"),
    ('"just text"\n', "line 1: expected a JSON object"),
])
def test_malformed_files_name_the_file_the_line_and_the_fault(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "aug.jsonl"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as info:
        read_augmentations(path)
    got = str(info.value)
    assert got.startswith(f"{path}, line ") or (got.startswith(f"{path}: ") and "empty" in message), got
    assert "\n" not in got and re.search(message, got), got


def test_an_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="augmentations file .*missing.json.* cannot be read"):
        read_augmentations(tmp_path / "missing.json")
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b'{"caf\xe9": []}')
    with pytest.raises(ConfigurationError, match="latin1.json: not UTF-8 text"):
        read_augmentations(bad)


@pytest.mark.parametrize("command", [
    ["search", "idx", "heart"],
    ["rescore", "idx", "heart", "-"],
    ["run", "--index", "idx", "--topics", "TOPICS", "--output", "OUT"],
    ["eval", "--index", "idx", "--topics", "TOPICS", "--qrels", "QRELS"],
    ["tune", "--dataset", "DATA", "--scorer", "bmx"],
])
def test_every_command_reports_a_malformed_file_in_one_line_before_the_engine(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "aug.jsonl"
    bad.write_text('{"1": [["heart attack", 0.5]]}\n{"2": [["bone", "heavy"]]}\n')
    topics = tmp_path / "topics.tsv"
    topics.write_text("1\theart attack\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("1 0 d1 1\n")
    argv = [{"TOPICS": str(topics), "OUT": str(tmp_path / "run.trec"), "QRELS": str(qrels),
             "DATA": str(tmp_path)}.get(a, a) for a in command]
    code, out, err = run(capsys, *argv, "--augmentations", str(bad), "--url", "http://127.0.0.1:9",
                         stdin='{"hits": {"hits": []}}')
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert lines == [f"esbridge: error: {bad}, line 2: query '2': pair 1: the weight must be a finite number >= 0, "
                     "got 'heavy'"], err


def test_augmenter_options_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "search", "idx", "q", "--augmenter-param", "fb_docs=5", "--url", "http://127.0.0.1:9")
    assert code == 2 and "--augmenter-param needs --augmenter" in err
    code, _, err = run(capsys, "search", "idx", "q", "--augmenter", "prf", "--augmenter-param", "fb_docs=0",
                       "--url", "http://127.0.0.1:9")
    assert code == 2 and "fb_docs must be an integer >= 1, got 0" in err
    code, _, err = run(capsys, "search", "idx", "q", "--original-weight", "2", "--url", "http://127.0.0.1:9")
    assert code == 2 and "--original-weight needs --augmentations or --augmenter" in err
    code, _, err = run(capsys, "search", "idx", "q", "--augmenter", "prf", "--original-weight", "-1",
                       "--url", "http://127.0.0.1:9")
    assert code == 2 and "original_weight must be a finite number >= 0, got -1" in err
    code, _, err = run(capsys, "search", "idx", "q", "--augmenter", "prf", "--hybrid", "--url", "http://127.0.0.1:9")
    assert code == 2 and "apply to the reranker, not to --hybrid" in err
    topics = tmp_path / "topics.tsv"
    topics.write_text("1\theart attack\n")
    code, _, err = run(capsys, "run", "--index", "idx", "--topics", str(topics), "--output", str(tmp_path / "r"),
                       "--system", "engine-bm25", "--augmenter", "prf", "--url", "http://127.0.0.1:9")
    assert code == 2 and "apply to the reranker (--system rerank)" in err
