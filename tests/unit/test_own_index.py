"""The pure parts of reading your own (plain) index and of adding esbridge's channels to it:
the layout found in a mapping, the virtual combined field, the merged statistics, the lengths
counted in positions, the put-mapping and analysis updates, and the messages."""

from __future__ import annotations

import pytest

from esbridge.cli.options import fields_option
from esbridge.errors import ConfigurationError
from esbridge.features.termvectors import FieldStats, FieldVector, _field_vector, merge_stats, sum_vectors
from esbridge.index import IndexLayout
from esbridge.index.definitions import build_index_body, load_mapping_file
from esbridge.index.plain import (
    _analysis_update,
    _source_problem,
    channel_mapping_update,
    missing_channels_message,
    plain_layout,
    text_fields,
)

MAPPING = {"properties": {
    "title": {"type": "text", "fields": {"en": {"type": "text", "analyzer": "english"},
                                         "raw": {"type": "keyword"}}},
    "body": {"type": "text"},
    "meta": {"properties": {"abstract": {"type": "text", "copy_to": "all"}, "year": {"type": "integer"}}},
    "all": {"type": "text"},
    "notes": {"type": "text", "analyzer": "mine"},
    "hidden": {"type": "text", "index": False},
    "kids": {"type": "nested", "properties": {"name": {"type": "text"}}},
    "code": {"type": "keyword", "fields": {"words": {"type": "text"}}},
    "tag": {"type": "keyword"},
}}


def test_text_fields_with_their_analyzers() -> None:
    found = text_fields(MAPPING, custom_analyzers={"mine"})
    assert list(found) == ["title", "title.en", "body", "meta.abstract", "all", "notes", "hidden", "code.words"]
    assert (found["title"].analyzer, found["title"].search_analyzer) == ("standard", "standard")
    assert found["title.en"].parent == "title" and found["title.en"].search_analyzer == "english"
    assert found["all"].copy_target and not found["meta.abstract"].copy_target
    assert found["notes"].custom and not found["title.en"].custom and not found["hidden"].indexed
    with_defaults = text_fields({"properties": {"a": {"type": "text"},
                                                "b": {"type": "text", "analyzer": "simple"},
                                                "c": {"type": "text", "analyzer": "simple",
                                                      "search_analyzer": "stop"}}},
                                custom_analyzers={"default", "default_search"})
    assert [(f.analyzer, f.search_analyzer, f.custom) for f in with_defaults.values()] == [
        ("default", "default_search", True), ("simple", "simple", False), ("simple", "stop", False)]


def test_plain_layout_finds_fields_of_one_analysis() -> None:
    mapping = {"properties": {k: MAPPING["properties"][k] for k in ("title", "body", "meta", "all", "hidden", "tag")}}
    layout = plain_layout("docs", [mapping])
    assert layout.plain and layout.fields == ("title", "body", "meta.abstract")  # not the copy_to target
    assert layout.channels == ("base",) and layout.search_analyzer == "standard" and layout.positions == ()
    with pytest.raises(ConfigurationError, match=r"analysed differently \(title \(standard\).*notes \(mine\)\).*"
                                                 r"fields=\['title'\] or --fields title.*--add-channels --index docs"):
        plain_layout("docs", [MAPPING], {"mine"})
    named = plain_layout("docs", [MAPPING], {"mine"}, fields="notes")
    assert named.fields == ("notes",) and named.positions == ("notes",) and named.search_analyzer == "mine"
    multi = plain_layout("docs", [MAPPING], (), fields=["title.en"])
    assert multi.doc_paths == (("title.en", "title"),) and multi.doc_path("title.en") == "title"


@pytest.mark.parametrize("fields,needle", [
    (["tag"], "'tag' is not a text field of index 'docs'; its text fields are title, title.en"),
    (["all"], "filled by copy_to"),
    (["hidden"], "not indexed"),
    (["title", "notes"], "analysed differently"),
])
def test_plain_layout_errors_name_the_field(fields: list[str], needle: str) -> None:
    with pytest.raises(ConfigurationError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        plain_layout("docs", [MAPPING], {"mine"}, fields=fields)


def test_source_that_is_off_or_filtered() -> None:
    off = {"_source": {"enabled": False}, "properties": {"a": {"type": "text"},
                                                         "b": {"type": "text", "term_vector": "yes"}}}
    assert _source_problem(off, "a") == "_source is disabled"
    assert plain_layout("x", [off]).fields == ("b",)  # stored term vectors need no _source
    with pytest.raises(ConfigurationError, match="no text field esbridge can read"):
        plain_layout("x", [{"_source": {"enabled": False}, "properties": {"a": {"type": "text"}}}])
    filtered = {"_source": {"excludes": ["meta.*"], "includes": []}}
    assert _source_problem(filtered, "meta.abstract") is not None and _source_problem(filtered, "title") is None
    assert _source_problem({"_source": {"includes": ["title", "meta"]}}, "meta.abstract") is None
    assert "includes only" in str(_source_problem({"_source": {"includes": ["title"]}}, "body"))


def test_several_indices_must_map_the_fields_alike() -> None:
    a = {"properties": {"text": {"type": "text"}}}
    b = {"properties": {"text": {"type": "text", "analyzer": "english"}}}
    assert plain_layout("logs-*", [a, a]).fields == ("text",)
    with pytest.raises(ConfigurationError, match="not mapped alike in every index"):
        plain_layout("logs-*", [a, b])


def test_the_virtual_combined_field() -> None:
    layout = IndexLayout(fields=("title", "body"), channels=("base",), plain=True, search_analyzer="standard")
    assert layout.subfield("body", "base") == "body"
    assert layout.subfield(layout.combined, "base") == "esb_all(title,body)"  # a key, never a field
    assert layout.indexed(layout.combined, "base") == ("title", "body")
    assert layout.indexed("title", "base") == ("title",)
    assert layout.analysis("base") == {"analyzer": "standard"}
    assert layout.all_subfields() == ["title", "body"]
    with pytest.raises(ConfigurationError, match="no 'prefix' channel"):
        layout.subfield("title", "prefix")
    own = IndexLayout()
    assert own.indexed(own.combined, "micro") == ("esb_all.micro",)
    assert own.analysis("base") == {"field": "esb_all"}  # the base channel is the field itself
    assert IndexLayout(base_subfield=True).analysis("base") == {"field": "esb_all.base"}
    with pytest.raises(ConfigurationError, match="only the base channel"):
        IndexLayout(fields=("a",), plain=True, search_analyzer="standard")
    with pytest.raises(ConfigurationError, match="search analyzer"):
        IndexLayout(fields=("a",), channels=("base",), plain=True)
    with pytest.raises(ConfigurationError, match="build_index_body needs an esbridge layout"):
        build_index_body(layout)
    with pytest.raises(ConfigurationError, match="must start with a letter"):
        build_index_body(IndexLayout(fields=("meta.title",)))


def test_merged_statistics_and_summed_vectors() -> None:
    a = FieldStats(doc_count=10, sum_ttf=50, df={"x": 3, "y": 0})
    b = FieldStats(doc_count=8, sum_ttf=30, df={"x": 5, "z": 2})
    m = merge_stats([a, b])
    assert (m.doc_count, m.sum_ttf, m.df) == (10, 80, {"x": 5, "y": 0, "z": 2})
    assert merge_stats([a]) is a
    v = sum_vectors([FieldVector({"x": 1, "y": 2}, length=2), FieldVector({"x": 3})])
    assert dict(v) == {"x": 4, "y": 2} and v.length == 5
    assert FieldVector(FieldVector({"x": 2}, length=1)).length == 1


def test_lengths_count_positions_when_the_engine_gives_them() -> None:
    stacked = {"terms": {"cell": {"term_freq": 2, "tokens": [{"position": 0}, {"position": 3}]},
                         "cellular": {"term_freq": 1, "tokens": [{"position": 0}]},
                         "growth": {"term_freq": 1, "tokens": [{"position": 1}]}}}
    vec = _field_vector(stacked)
    assert dict(vec) == {"cell": 2, "cellular": 1, "growth": 1} and vec.length == 3
    assert _field_vector({"terms": {"a": {"term_freq": 2}, "b": {"term_freq": 1}}}).length == 3
    assert _field_vector({}).length == 0


def test_channel_mapping_update_keeps_what_the_field_has() -> None:
    mapping = {"properties": {
        "title": {"type": "text", "analyzer": "english", "copy_to": "everything",
                  "fields": {"raw": {"type": "keyword"}}},
        "meta": {"properties": {"abstract": {"type": "text"}}},
        "tag": {"type": "keyword"},
    }}
    body = channel_mapping_update("docs", mapping, ["title", "meta.abstract"])
    title = body["properties"]["title"]
    assert title["analyzer"] == "english" and title["copy_to"] == ["everything", "esb_all"]
    assert set(title["fields"]) == {"raw", "base", "prefix", "bigram", "micro", "length"}
    assert title["fields"]["prefix"] == {"type": "text", "analyzer": "esb_prefix", "index_options": "freqs",
                                         "term_vector": "yes"}
    abstract = body["properties"]["meta"]["properties"]["abstract"]
    assert abstract["copy_to"] == ["esb_all"] and "base" in abstract["fields"]
    assert body["properties"]["esb_all"] == load_mapping_file("text_field.json")
    assert mapping["properties"]["title"]["copy_to"] == "everything"  # the input is not changed
    # run again after an interruption: esbridge's own sub-fields are no conflict
    resumed = {"properties": {**mapping["properties"], "title": title, "esb_all": body["properties"]["esb_all"]}}
    again = channel_mapping_update("docs", resumed, ["title"])["properties"]
    assert again["title"]["copy_to"] == ["everything", "esb_all"]
    assert "esb_all" not in again  # there already: not sent again
    # sub-fields an earlier esbridge added with positions stay so (the engine refuses to change index_options)
    older = {**title, "fields": {k: {kk: vv for kk, vv in v.items() if kk != "index_options"}
                                 for k, v in title["fields"].items()}}
    kept = channel_mapping_update("docs", {"properties": {**mapping["properties"], "title": older}}, ["title"])
    assert "index_options" not in kept["properties"]["title"]["fields"]["bigram"]


@pytest.mark.parametrize("mapping,fields,needle", [
    ({"properties": {"tag": {"type": "keyword"}}}, ["tag"], "is of type 'keyword', not text"),
    ({"properties": {"t": {"type": "text", "fields": {"en": {"type": "text"}}}}}, ["t.en"], "multi-field of 't'"),
    ({"properties": {"t": {"type": "text"}}}, ["body"], "has no field 'body'; its text fields are t"),
    ({"properties": {"t": {"type": "text", "fields": {"base": {"type": "keyword"}}}}}, ["t"], "sub-field 'base'"),
    ({"properties": {"t": {"type": "text"}, "esb_all": {"type": "keyword"}}}, ["t"], "already has a field 'esb_all'"),
    ({"properties": {"t": {"type": "text", "copy_to": "all"}, "all": {"type": "text"}}}, ["all"], "filled by copy_to"),
])
def test_channel_mapping_update_errors(mapping: dict[str, object], fields: list[str], needle: str) -> None:
    with pytest.raises(ConfigurationError, match=needle.replace("(", r"\(")):
        channel_mapping_update("docs", mapping, fields)


def test_analysis_update_adds_what_is_missing() -> None:
    full = load_mapping_file("analysis.json")
    add = _analysis_update("docs", {"analyzer": {"mine": {"type": "standard"}}})
    assert add == full
    # as the engine returns them: every scalar a string
    returned = {"filter": {"esb_shingle2": {"type": "shingle", "min_shingle_size": "2", "max_shingle_size": "2",
                                            "output_unigrams": "false"}}}
    assert "esb_shingle2" not in _analysis_update("docs", returned).get("filter", {})
    with pytest.raises(ConfigurationError, match="defines the analyzer 'esb_base' differently"):
        _analysis_update("docs", {"analyzer": {"esb_base": {"type": "custom", "tokenizer": "whitespace"}}})


def test_missing_channels_message_is_one_line_with_the_fix() -> None:
    layout = IndexLayout(fields=("text",), channels=("base",), plain=True, search_analyzer="english")
    msg = missing_channels_message("evolved", ["prefix", "bigram", "micro"], "docs", layout)
    assert msg == ("scorer 'evolved' needs the prefix, bigram and micro channels, which index 'docs' does not have "
                   "(a plain index: its only channel, base, is the text field 'text' as analysed by 'english'); add "
                   "them with `esbridge index --add-channels --index docs` (esbridge.index.add_channels), or use a "
                   "scorer that reads only base (e.g. bm25, bmx)")
    assert "\n" not in missing_channels_message("arch_a", ["prefix"], "docs", IndexLayout(channels=("base",)))


def test_fields_option() -> None:
    assert fields_option(None) is None
    assert fields_option(["title,text", " body "]) == ("title", "text", "body")
    with pytest.raises(ConfigurationError, match="--fields names no field"):
        fields_option([" , "])


def test_layout_records_which_channels_each_text_field_has() -> None:
    """New layouts give text fields the base channel only and record it; an index created before
    the choice existed (no ``field_channels`` in its ``_meta``) has every channel everywhere."""
    from esbridge.index.definitions import build_index_body, layout_from_meta

    layout = IndexLayout()
    assert layout.field_channels == ("base",)
    assert layout_from_meta(layout.to_meta()) == layout
    old = {"fields": ["title", "text"], "combined": "esb_all", "channels": ["base", "prefix", "bigram", "micro"]}
    assert layout_from_meta(old).field_channels == ("base", "prefix", "bigram", "micro")
    assert layout_from_meta(old).subfield("title", "base") == "title.base"  # as those indices were built
    assert layout.subfield("title", "base") == "title" and layout.subfield("title", "micro") == "title.micro"
    assert layout.lacks(("title", "text"), ("base", "prefix")) == ["prefix"]
    assert layout.lacks((layout.combined,), ("base", "prefix")) == []
    assert "title.prefix" not in layout.all_subfields() and "esb_all.prefix" in layout.all_subfields()
    full = IndexLayout(field_channels=("base", "prefix", "bigram", "micro"))
    props = build_index_body(full)["mappings"]["properties"]
    assert set(props["title"]["fields"]) == {"prefix", "bigram", "micro", "length"}
    assert props["title"]["analyzer"] == "esb_base" and props["title"]["term_vector"] == "yes"
    for bad in (("prefix",), ("base", "nope")):
        with pytest.raises(ConfigurationError, match="field_channels must include 'base'"):
            IndexLayout(field_channels=bad)
