"""Topics, judgments and run files: the formats read, and an error naming the file and line for each
kind of malformed input."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from esbridge.evaluation.metrics import per_query_metrics
from esbridge.evaluation.trecfiles import InputFileError, read_qrels, read_run, read_topics, trec_order

TREC_TOPICS = """<top>
<head> Tipster Topic Description
<num> Number: 051
<dom> Domain: International Economics
<title> Topic: Airbus Subsidies

<desc> Description:
Document will discuss government assistance to Airbus Industrie,
or mention a trade dispute.

<narr> Narrative:
A relevant document will cite or discuss assistance.

<con> Concepts:
1. Airbus Industrie
</top>

<top>

<num> Number: 302

<title> Poliomyelitis and Post-Polio

<desc> Description:
Is the disease of Poliomyelitis (polio) under control?

<narr> Narrative:
Relevant documents should contain data on cases.

</top>
"""

CLOSED_TAGS = """<top>
<num>Q7</num>
<title>solar panels</title>
<desc>How efficient are solar panels?</desc>
</top>
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _error(match: str, fn: object, *args: object) -> str:
    with pytest.raises(InputFileError) as info:
        fn(*args)  # type: ignore[operator]
    message = str(info.value)
    assert re.search(match, message), message
    assert "\n" not in message
    return message


# ---- topics ------------------------------------------------------------------------------------

def test_trec_topics_fields_prefixes_and_numbers(tmp_path: Path) -> None:
    path = _write(tmp_path, "topics.txt", TREC_TOPICS)
    topics = read_topics(path)
    assert [t.id for t in topics] == ["51", "302"]  # leading zeros go, as in TREC's judgments
    t = topics[0]
    assert t.title == "Airbus Subsidies"
    assert t.description == ("Document will discuss government assistance to Airbus Industrie, "
                             "or mention a trade dispute.")
    assert t.narrative == "A relevant document will cite or discuss assistance."
    assert t.line == 1 and topics[1].line == 18
    assert [x.text() for x in topics] == ["Airbus Subsidies", "Poliomyelitis and Post-Polio"]
    assert read_topics(path, "desc")[1].text("desc") == "Is the disease of Poliomyelitis (polio) under control?"
    assert read_topics(path, "title+desc")[1].text("title+desc") == (
        "Poliomyelitis and Post-Polio Is the disease of Poliomyelitis (polio) under control?")


def test_trec_topics_with_closing_tags_and_gzip(tmp_path: Path) -> None:
    path = tmp_path / "topics.gz"
    path.write_bytes(gzip.compress(CLOSED_TAGS.encode()))
    (t,) = read_topics(path, "title+desc")
    assert (t.id, t.title, t.description) == ("Q7", "solar panels", "How efficient are solar panels?")


def test_beir_and_tab_separated_topics(tmp_path: Path) -> None:
    beir = _write(tmp_path, "queries.jsonl", '{"_id": "1", "text": "a  b\\nc", "metadata": {}}\n\n'
                                             '{"_id": 2, "text": "d"}\n')
    assert [(t.id, t.title, t.line) for t in read_topics(beir)] == [("1", "a b c", 1), ("2", "d", 3)]
    tsv = _write(tmp_path, "queries.tsv", "q1\tfirst query\nq2\tsecond\n")
    assert [(t.id, t.title) for t in read_topics(tsv)] == [("q1", "first query"), ("q2", "second")]


@pytest.mark.parametrize(("text", "match"), [
    ('{"_id": "1", "text": "a"}\n{"_id": "2", "text": \n', r"queries\.jsonl, line 2: not a JSON object"),
    ('{"_id": "1", "text": "a"}\n{"id": "2", "text": "b"}\n', r"line 2: expected a query object with \"_id\""),
    ('{"_id": "1", "text": "a"}\n{"_id": "1", "text": "b"}\n', r"line 2: topic '1' again \(first at line 1\)"),
    ('{"_id": "1", "text": "  "}\n', r"line 1: topic '1' has no title text"),
])
def test_beir_topic_errors(tmp_path: Path, text: str, match: str) -> None:
    _error(match, read_topics, _write(tmp_path, "queries.jsonl", text))


@pytest.mark.parametrize(("text", "match"), [
    ("<top>\n<num> Number: 1\n<title> a\n<top>\n<num> Number: 2\n</top>\n",
     r"topics\.txt, line 4: <top> inside the topic opened at line 1 \(is a </top> missing\?\)"),
    ("<top>\n<num> Number: 1\n<title> a\n", r"topics\.txt, line 1: <top> is never closed by </top>"),
    ("<top>\n<title> a\n</top>\n", r"line 1: the topic has no <num>"),
    ("<top>\n<num> Number: 1\n<title> a\n</top>\nstray words\n", r"line 5: text outside <top> \.\.\. </top>"),
    ("<top>\n<num> Number: 1 2\n<title> a\n</top>\n", r"line 2: <num> should hold one topic number"),
    ("<top>\n<num> Number: 1\n<title> a\n<title> b\n</top>\n", r"line 4: a second <title>"),
    ("</top>\n", r"line 1: </top> without a <top>"),
    ("<top>\n<num> Number: 1\n<title>\n<desc> Description: only a description\n</top>\n",
     r"line 1: topic '1' has no title text; choose another --topic-field"),
    ("<top>\n<num> 1\n<title> a\n</top>\n<top>\n<num> 001\n<title> b\n</top>\n",
     r"line 5: topic '1' again \(first at line 1\)"),
])
def test_trec_topic_errors(tmp_path: Path, text: str, match: str) -> None:
    _error(match, read_topics, _write(tmp_path, "topics.txt", text))


def test_topic_format_errors(tmp_path: Path) -> None:
    _error(r"plain\.txt, line 2: not a topics file", read_topics, _write(tmp_path, "plain.txt", "\njust words\n"))
    _error(r"empty\.txt holds no topics", read_topics, _write(tmp_path, "empty.txt", "\n \n"))
    _error(r"BEIR queries have a text only, no description; use --topic-field title",
           read_topics, _write(tmp_path, "q.jsonl", '{"_id": "1", "text": "a"}\n'), "desc")
    _error(r"topics file '.*missing' does not exist", read_topics, tmp_path / "missing")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"q1\tok\nq2\tcaf\xe9\n")
    _error(r"latin1\.txt, line 2: not UTF-8 text", read_topics, bad)
    _error(r"topic field 'body' is not one of title, desc, title\+desc", read_topics, bad, "body")


# ---- judgments ---------------------------------------------------------------------------------

def test_trec_and_beir_judgments_read_the_same(tmp_path: Path) -> None:
    trec = _write(tmp_path, "qrels.txt", "51 0 AP1 1\n51 0 AP2 0\n\n52 0 AP3 2\n53 0 AP9 -1\n")
    beir = _write(tmp_path, "test.tsv", "query-id\tcorpus-id\tscore\n51\tAP1\t1\n51\tAP2\t0\n52\tAP3\t2\n53\tAP9\t-1\n")
    expected = {"51": {"AP1": 1, "AP2": 0}, "52": {"AP3": 2}, "53": {"AP9": -1}}
    assert read_qrels(trec) == expected
    assert read_qrels(beir) == expected
    headerless = _write(tmp_path, "h.tsv", "51\tAP1\t1.0\n")
    assert read_qrels(headerless) == {"51": {"AP1": 1}}


@pytest.mark.parametrize(("text", "match"), [
    ("51 0 AP1 1\n51 0 AP2 high\n", r"qrels\.txt, line 2: relevance 'high' is not an integer"),
    ("51 0 AP1 1\n51 AP2 1\n", r"line 2: expected 'query-id iteration doc-id relevance' like the lines before"),
    ("51 AP2\n", r"line 1: expected TREC judgments .* or BEIR judgments"),
    ("51 0 AP1 1\n52 0 AP2 1\n51 0 AP1 2\n", r"line 3: document 'AP1' of query '51' judged 2 here and 1 at line 1"),
    ("q\tc\ts\n1\td\t1\n2\td 1\n", r"line 3: expected query-id<TAB>corpus-id<TAB>score like the lines before"),
    ("51 0 AP1 0.5\n", r"line 1: relevance '0.5' is not an integer"),
    ("\n\n", r"qrels\.txt holds no judgments"),
])
def test_judgment_errors(tmp_path: Path, text: str, match: str) -> None:
    _error(match, read_qrels, _write(tmp_path, "qrels.txt", text))


# ---- runs --------------------------------------------------------------------------------------

def test_run_order_is_trec_evals(tmp_path: Path) -> None:
    path = _write(tmp_path, "sys.trec", "1 Q0 b 1 2.0 mine\n1 Q0 a 2 2.0 mine\n1 Q0 c 3 5.0 mine\n"
                                        "1 Q0 d 4 2.0 mine\n2 Q0 x 1 -1 mine\n")
    run = read_run(path)
    assert run.ranking == {"1": ["c", "d", "b", "a"], "2": ["x"]}  # score down, then doc id down
    assert run.scores["1"] == [5.0, 2.0, 2.0, 2.0]
    assert run.name == "mine" and run.tags == ("mine",) and len(run.sha256) == 64
    assert trec_order(["a", "b"], [1.0, 1.0]) == (["b", "a"], [1.0, 1.0])


def test_run_measures_match_trec_eval_on_ties(tmp_path: Path) -> None:
    import ir_measures

    run_text = "1 Q0 a 1 1.0 t\n1 Q0 b 2 1.0 t\n1 Q0 c 3 1.0 t\n1 Q0 d 4 0.5 t\n2 Q0 e 1 3 t\n2 Q0 f 2 3 t\n"
    path = _write(tmp_path, "tied.trec", run_text)
    qrels = {"1": {"a": 1, "d": 2}, "2": {"e": 1}}
    ours = per_query_metrics(qrels, read_run(path).ranking)
    measure = ir_measures.nDCG @ 10
    theirs = {m.query_id: m.value for m in ir_measures.iter_calc(
        [measure], [ir_measures.Qrel(q, d, g) for q, j in qrels.items() for d, g in j.items()],
        list(ir_measures.read_trec_run(str(path))))}
    for q in qrels:
        assert ours[q]["ndcg@10"] == pytest.approx(theirs[q], abs=1e-12)
    # the rank column is not what orders: c (rank 3) comes first among the tied documents
    assert read_run(path).ranking["1"][:3] == ["c", "b", "a"]


def test_run_name_without_one_tag(tmp_path: Path) -> None:
    path = _write(tmp_path, "bm25-run.trec", "1 Q0 a 1 1.0 x\n2 Q0 a 1 1.0 y\n")
    assert read_run(path).name == "bm25-run"
    gz = tmp_path / "r.trec.gz"
    gz.write_bytes(gzip.compress(b"1 Q0 a 1 1.0 sys\n"))
    assert read_run(gz).ranking == {"1": ["a"]}


@pytest.mark.parametrize(("text", "match"), [
    ("1 Q0 a 1 1.0 t\n1 Q0 b 2 1.0\n",
     r"run\.trec, line 2: expected 'query-id Q0 doc-id rank score tag' \(6 columns\), got 5"),
    ("1 Q0 a 1 1.0 t\n1 Q0 b two 1.0 t\n", r"line 2: rank 'two' is not an integer"),
    ("1 Q0 a 1 high t\n", r"line 1: score 'high' is not a finite number"),
    ("1 Q0 a 1 nan t\n", r"line 1: score 'nan' is not a finite number"),
    ("1 Q0 a 1 1.0 t\n2 Q0 a 1 1.0 t\n1 Q0 a 2 0.5 t\n",
     r"line 3: document 'a' again for query '1' \(first at line 1\)"),
    ("\n", r"run\.trec holds no run lines"),
])
def test_run_errors(tmp_path: Path, text: str, match: str) -> None:
    _error(match, read_run, _write(tmp_path, "run.trec", text))
