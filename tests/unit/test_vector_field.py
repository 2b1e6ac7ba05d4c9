"""The engine's dense-vector field as esbridge maps it: one vector per document, or nested passages."""

from __future__ import annotations

import json

import pytest

from esbridge.errors import ConfigurationError
from esbridge.index import IndexLayout, VectorField
from esbridge.index.definitions import build_index_body, document_vector_field


def test_one_vector_per_document_is_a_plain_knn_vector() -> None:
    body = build_index_body(IndexLayout(), vector=VectorField(dim=384, model="m"))
    field = body["mappings"]["properties"]["esbridge_vector"]
    assert field["type"] == "knn_vector" and field["dimension"] == 384
    assert body["settings"]["index"]["knn"] is True
    assert "passages" not in body["mappings"]["_meta"]["esbridge"]["vector"]


@pytest.mark.parametrize("kind", ["knn_vector", "dense_vector"])
def test_passages_are_nested_vectors_of_the_engines_type(kind: str) -> None:
    body = build_index_body(IndexLayout(), vector=VectorField(dim=384, model="m", passages=64, type=kind))
    field = body["mappings"]["properties"]["esbridge_vector"]
    assert field["type"] == "nested"
    vector = field["properties"]["vector"]
    assert vector["type"] == kind
    if kind == "dense_vector":
        # not quantized: the engine's score stays the cosine
        assert vector["similarity"] == "cosine" and vector["index_options"] == {"type": "hnsw"}
        assert "knn" not in body["settings"]["index"]  # an OpenSearch setting Elasticsearch refuses
    else:
        assert vector["method"]["space_type"] == "cosinesimil" and body["settings"]["index"]["knn"] is True
    meta = body["mappings"]["_meta"]["esbridge"]["vector"]
    assert meta["passages"] == 64 and meta["type"] == kind


@pytest.mark.parametrize("passages", [None, 64])
def test_vectors_are_left_out_of_the_stored_source_and_kept_in_doc_values(passages: int | None) -> None:
    vf = VectorField(dim=384, model="m", passages=passages, type="dense_vector")
    body = build_index_body(IndexLayout(), vector=vf)
    props = body["mappings"]["properties"]
    assert vf.values == "esbridge_vector_values"
    assert props["esbridge_vector_values"] == {"type": "binary", "doc_values": True}
    # every search reads hits' _id from the blocks _source is stored in: vectors there slow them all
    assert body["mappings"]["_source"] == {"excludes": ["esbridge_id", "esbridge_vector", "esbridge_vector_values"]}
    assert body["mappings"]["_meta"]["esbridge"]["vector"]["values"] == "esbridge_vector_values"


@pytest.mark.parametrize("name", ["title", "text_values"])
def test_a_vector_field_may_not_replace_a_text_field(name: str) -> None:
    with pytest.raises(ConfigurationError, match=f"{name!r} would replace a text field"):
        build_index_body(IndexLayout(fields=("title", "text_values")),
                         vector=VectorField(dim=384, model="m", name=name.removesuffix("_values")))


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"passages": 4}, "vector passages must be an integer >= 8"),
    ({"passages": True}, "vector passages must be an integer >= 8"),
    ({"type": "sparse_vector"}, "vector type must be one of knn_vector, dense_vector"),
    ({"dim": 0}, "vector dimension must be an integer"),
])
def test_a_bad_vector_field_is_refused_naming_the_parameter(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigurationError, match=needle):
        VectorField(**{"dim": 384, "model": "m", **kwargs})  # type: ignore[arg-type]


def test_int8_quantization_is_each_engines_own() -> None:
    from esbridge.index import VectorField

    es = VectorField(dim=8, model="m", passages=64, type="dense_vector", quantization="int8")
    assert es.mapping()["properties"]["vector"]["index_options"] == {"type": "int8_hnsw"}
    os_ = VectorField(dim=8, model="m", passages=64, quantization="int8")
    assert os_.mapping()["properties"]["vector"]["method"]["parameters"] == {
        "encoder": {"name": "sq", "parameters": {"bits": 7}}}
    assert os_.to_meta()["quantization"] == "int8" and "quantization" not in VectorField(dim=8, model="m").to_meta()
    with pytest.raises(ConfigurationError, match="quantization must be None, 'int8' or 'bbq'"):
        VectorField(dim=8, model="m", quantization="int4")


def test_bbq_and_oversampling_are_elasticsearchs() -> None:
    from esbridge.index import VectorField

    bbq = VectorField(dim=8, model="m", passages=64, type="dense_vector", quantization="bbq", oversample=3)
    assert bbq.mapping()["properties"]["vector"]["index_options"] == {"type": "bbq_hnsw",
                                                                       "rescore_vector": {"oversample": 3.0}}
    assert bbq.to_meta()["quantization"] == "bbq" and bbq.to_meta()["oversample"] == 3.0
    assert VectorField(dim=8, model="m", type="dense_vector", quantization="int8", oversample=0).mapping()[
        "index_options"] == {"type": "int8_hnsw", "rescore_vector": {"oversample": 0.0}}
    assert "oversample" not in VectorField(dim=8, model="m", type="dense_vector", quantization="bbq").to_meta()
    with pytest.raises(ConfigurationError, match="'bbq' is Elasticsearch's"):
        VectorField(dim=8, model="m", quantization="bbq")
    with pytest.raises(ConfigurationError, match="oversample applies to a quantized Elasticsearch"):
        VectorField(dim=8, model="m", quantization="int8", oversample=2)
    with pytest.raises(ConfigurationError, match="oversample applies to a quantized Elasticsearch"):
        VectorField(dim=8, model="m", type="dense_vector", oversample=2)
    for bad in (0.5, 11, True, "2"):
        with pytest.raises(ConfigurationError, match="oversample must be 0"):
            VectorField(dim=8, model="m", type="dense_vector", quantization="bbq", oversample=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["knn_vector", "dense_vector"])
def test_whole_document_vector_fields_beside_the_passages(kind: str) -> None:
    passages = VectorField(dim=384, model="bge-small-en-v1.5-q", passages=64, type=kind)
    docs = [document_vector_field("bge-small-en-v1.5-q", 384, kind), document_vector_field("e5-small-v2-q", 384, kind)]
    assert [d.name for d in docs] == ["esbridge_document_bge_small_en_v1_5_q", "esbridge_document_e5_small_v2_q"]
    body = build_index_body(IndexLayout(), vector=passages, document_vectors=docs)
    props = body["mappings"]["properties"]
    for d in docs:
        assert props[d.name] == d.mapping() and "nested" not in json.dumps(props[d.name])
        assert props[d.values] == {"type": "binary", "doc_values": True}
        # left out of the stored source, like the passages' vectors
        assert {d.name, d.values} <= set(body["mappings"]["_source"]["excludes"])
    assert body["mappings"]["_meta"]["esbridge"]["document_vectors"] == [d.to_meta() for d in docs]
    assert body["mappings"]["_meta"]["esbridge"]["vector"] == passages.to_meta()
    # without whole-document fields the body is the one it always was
    assert "document_vectors" not in build_index_body(IndexLayout(), vector=passages)["mappings"]["_meta"]["esbridge"]


def test_whole_document_vector_fields_are_checked() -> None:
    passages = VectorField(dim=384, model="m", passages=64)
    with pytest.raises(ConfigurationError, match="one document vector field per model"):
        build_index_body(IndexLayout(), vector=passages,
                         document_vectors=[document_vector_field("m", 384), document_vector_field("m", 384)])
    with pytest.raises(ConfigurationError, match="takes no passages"):
        build_index_body(IndexLayout(), vector=passages,
                         document_vectors=[VectorField(dim=384, model="x", passages=64)])
    with pytest.raises(ConfigurationError, match="one engine's vectors"):
        build_index_body(IndexLayout(), vector=passages,
                         document_vectors=[document_vector_field("x", 384, "dense_vector")])
