"""The engine plugin's Python side without an engine: its sources per engine, its zip, and the
reading of the features it adds to hits."""

from __future__ import annotations

import base64
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from esbridge.errors import EngineError, ProvisioningError
from esbridge.features.plugin import (
    EXTENSION,
    analysing_ext,
    analysis_from,
    candidates_from,
    carried_features,
    features_ext,
    features_tag,
)
from esbridge.features.termvectors import QueryChannel
from esbridge.index import IndexLayout
from esbridge.nodes import artifacts, check_plugin, features_plugin
from esbridge.nodes.java import find_java

LAYOUT = IndexLayout(fields=("title", "text"))
QUERY = {"base": QueryChannel(("vitamin", "bone"), (1, 2)), "prefix": QueryChannel(("vitam",), (1,))}


@pytest.mark.parametrize("family", features_plugin.FAMILIES)
def test_each_engine_compiles_its_own_lines(family: str) -> None:
    other = next(f for f in features_plugin.FAMILIES if f != family)
    sources = dict(features_plugin._sources(family))
    java = b"".join(data for name, data in sources.items() if name.endswith(".java")).decode()
    assert f"//@{other}" not in java
    assert f"//@{family}" in java
    assert f"import org.{family}.search.fetch.FetchSubPhase;" in java
    assert f"import org.{other}." not in java


@pytest.mark.parametrize("family", features_plugin.FAMILIES)
def test_the_zip_holds_the_jar_and_a_descriptor_for_that_engine(family: str, tmp_path: Path) -> None:
    jar = tmp_path / "x.jar"
    jar.write_bytes(b"PK")
    out = features_plugin.pack_zip(family, "9.9.9", jar, tmp_path / "dist")
    with zipfile.ZipFile(out) as zf:
        jar_name = f"esbridge-features-{features_plugin.PLUGIN_VERSION}.jar"
        assert sorted(zf.namelist()) == [jar_name, "plugin-descriptor.properties"]
        props = dict(line.split("=", 1) for line in zf.read("plugin-descriptor.properties").decode().splitlines())
    assert props[f"{family}.version"] == "9.9.9"
    assert props["classname"] == features_plugin.CLASSNAME and props["name"] == features_plugin.PLUGIN_NAME
    assert "{" not in "".join(props.values())


def test_the_extension_names_each_subfield_with_the_terms_of_its_channel() -> None:
    ext = features_ext(LAYOUT, QUERY, [LAYOUT.combined])[EXTENSION]
    assert ext["groups"] == [{"fields": [LAYOUT.combined], "terms": ["vitamin", "bone"]},
                             {"fields": [f"{LAYOUT.combined}.prefix"], "terms": ["vitam"]}]
    assert ext["tag"] == features_tag(LAYOUT, QUERY, [LAYOUT.combined])
    assert features_tag(LAYOUT, {"base": QueryChannel(("vitamin",), (1,))}, [LAYOUT.combined]) != ext["tag"]


def _packed(*values: int, wide: bool = False) -> str:
    """What the plugin sends for one hit: little-endian 16-bit integers (32-bit ones with
    ``wide``) in base64."""
    return base64.b64encode(struct.pack(f"<{len(values)}{'i' if wide else 'h'}", *values)).decode()


def _hit(doc: str, tag: str, *groups: list[int]) -> dict[str, object]:
    packed = _packed(*(v for g in groups for v in g))
    return {"_id": doc, "_index": "i", "fields": {"_esbridge_features": [[tag, packed]]}}


def test_carried_features_are_taken_out_of_the_hits() -> None:
    tag = features_tag(LAYOUT, QUERY, [LAYOUT.combined])
    hits = [_hit("a", tag, [10, 8, 1, 2], [10, 9, 1]), _hit("b", tag, [5, 5, 0, 0], [5, 5, 0])]
    hits[1]["fields"]["title"] = ["kept"]  # type: ignore[index]
    carried = carried_features(hits)
    assert carried.tag == tag and set(carried) == {"a", "b"}
    assert "fields" not in hits[0] and hits[1]["fields"] == {"title": ["kept"]}
    cands = candidates_from("i", LAYOUT, QUERY, [LAYOUT.combined], ["b", "gone", "a"], carried)
    assert cands.found == (True, False, True)
    base = cands.matrices[LAYOUT.combined]
    assert base.rows.tolist() == [0, 2] and base.terms == ("vitamin", "bone")
    assert np.array_equal(base.tf, [[0, 0], [1, 2]]) and base.length.tolist() == [5, 10]
    assert cands.matrices[f"{LAYOUT.combined}.prefix"].distinct.tolist() == [5, 9]


def test_numbers_packed_in_16_and_32_bits_read_alike() -> None:
    tag = features_tag(LAYOUT, QUERY, [LAYOUT.combined])
    carried = carried_features([_hit("a", tag, [10, 8, 1, 2], [10, 9, 1])])
    carried["b"] = _packed(70_000, 40_000, 33_000, 0, 70_000, 40_001, 33_000, wide=True)
    cands = candidates_from("i", LAYOUT, QUERY, [LAYOUT.combined], ["b", "a"], carried)
    base = cands.matrices[LAYOUT.combined]
    assert base.length.tolist() == [70_000, 10] and base.tf.tolist() == [[33_000, 0], [1, 2]]
    assert cands.matrices[f"{LAYOUT.combined}.prefix"].distinct.tolist() == [40_001, 9]


def test_hits_of_two_searches_are_not_mixed() -> None:
    assert not carried_features([_hit("a", "t1", [1, 1, 0, 0]), _hit("b", "t2", [1, 1, 0, 0])])


def test_an_answer_of_another_shape_is_an_error_naming_the_document() -> None:
    with pytest.raises(EngineError, match="'a'"):
        candidates_from("i", LAYOUT, QUERY, [LAYOUT.combined], ["a"], {"a": _packed(1, 1, 0, 1, 1, 0)})
    with pytest.raises(EngineError, match="'b'"):
        candidates_from("i", LAYOUT, QUERY, [LAYOUT.combined], ["a", "b"],
                        {"a": _packed(1, 1, 0, 1, 1, 1, 0), "b": "not base64!"})
    with pytest.raises(EngineError, match="without term frequencies"):
        candidates_from("i", LAYOUT, QUERY, [LAYOUT.combined], ["a"], {"a": _packed(-1, -1, 0, 0, 1, 1, 0)})


def test_features_of_an_older_plugin_are_an_error_naming_the_document() -> None:
    old = {"_id": "a", "_index": "i", "fields": {"_esbridge_features": [["t", 10, 8, 1, 2, 10, 9, 1]]}}
    with pytest.raises(EngineError, match="'a'.*plugin build"):
        carried_features([old])


def test_plugin_build_refuses_a_version_it_has_no_jars_for(capsys: pytest.CaptureFixture[str]) -> None:
    from esbridge.cli.main import main

    assert main(["plugin", "build", "--distribution", "opensearch", "--version", "2.11.0"]) != 0
    err = capsys.readouterr().err
    assert "3.8.0" in err and "2.11.0" in err and "Traceback" not in err


def test_the_analysing_extension_names_the_combined_fields_channels() -> None:
    ext = analysing_ext(LAYOUT, "Vitamin D and bone", ["base", "prefix"], ["prefix"])[EXTENSION]
    assert ext["analyze"] == {"text": "Vitamin D and bone", "fields": ["esb_all", "esb_all.prefix"],
                              "count": ["esb_all.prefix"]}


def _analysed_hit(tokens: list[list[list[object]]], stats: list[list[int]]) -> dict[str, object]:
    return {"_id": "d1", "fields": {"_esbridge_query": [tokens], "_esbridge_stats": [stats],
                                    "_esbridge_features": [["analyze", "AAAA"]]}}


def test_the_plugins_analysis_is_read_and_taken_out_of_the_hit() -> None:
    hit = _analysed_hit([[[0, 1, 2], ["bone", "vitamin", "bone"]], [[0], ["vitam"]]],
                        [[10, 100, 3, 7], [10, 50, 2]])
    got = analysis_from("idx", LAYOUT, ["base", "prefix"], [hit])
    assert got is not None and got.in_order
    assert got.query == {"base": QueryChannel(("bone", "vitamin"), (2, 1)), "prefix": QueryChannel(("vitam",), (1,))}
    assert got.stats["esb_all"].df == {"bone": 3, "vitamin": 7}
    assert (got.stats["esb_all.prefix"].doc_count, got.stats["esb_all.prefix"].sum_ttf) == (10, 50)
    assert hit["fields"] == {"_esbridge_features": [["analyze", "AAAA"]]}  # the features stay for carried_features
    assert analysis_from("idx", LAYOUT, ["base"], [{"_id": "d2"}]) is None


def test_tokens_at_one_position_are_ordered_by_term_as_term_vectors_order_them() -> None:
    """Where the plugin's order is not esbridge's, the query is put in esbridge's order and its
    features are not used as counted (in_order is false)."""
    hit = _analysed_hit([[[0, 0, 1], ["zinc", "iron", "bone"]]], [[10, 100, 1, 2, 3]])
    got = analysis_from("idx", LAYOUT, ["base"], [hit])
    assert got is not None and not got.in_order
    assert got.query["base"].terms == ("iron", "zinc", "bone")
    assert got.stats["esb_all"].df == {"zinc": 1, "iron": 2, "bone": 3}


@pytest.mark.parametrize("tokens, stats", [
    ([[[0], ["bone"]]], [[10, 100]]),            # no df for its term
    ([[[0, 1], ["bone"]]], [[10, 100, 1]]),      # positions and terms of different lengths
    ([], []),                                    # no channel answered
])
def test_an_analysis_of_another_shape_is_an_error_naming_the_index(tokens: list[object], stats: list[object]) -> None:
    with pytest.raises(EngineError, match="'idx'.*esbridge plugin build"):
        analysis_from("idx", LAYOUT, ["base"], [_analysed_hit(tokens, stats)])  # type: ignore[arg-type]


@pytest.mark.parametrize(("family", "distribution"), features_plugin.CHECKED)
def test_the_plugin_compiles_and_passes_its_java_unit_tests(family: str, distribution: str) -> None:
    """The plugin's sources compiled against the engine's installed jars with the Java unit tests of
    ``tests/java/esbridge-features`` (parsing, limits, packing, norms), which then pass; no node starts.
    Skipped where the jars or a JDK are missing: `.ci/run` runs the same check before the suite
    (``python -m esbridge.nodes.check_plugin --check``), failing there instead."""
    lib = artifacts.installed_lib(distribution)
    if lib is None:
        pytest.skip(f"the jars of {distribution} are not installed (esbridge engine install --distribution "
                    f"{distribution})")
    try:
        java = find_java(features_plugin.JAVA_RELEASE)
    except ProvisioningError as err:
        pytest.skip(str(err))
    if features_plugin._javac(java) is None:
        pytest.skip(f"{java} has no javac: a JDK {features_plugin.JAVA_RELEASE}+ compiles the plugin")
    version = artifacts.runner_spec(distribution).version
    output = features_plugin.check(family, version, lib, java, features_plugin.default_tests())
    assert output.endswith("tests passed"), output
    assert "FAILED" not in output


def test_the_plugin_check_names_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Asked for where nothing is installed, the check fails naming how to install each engine's jars."""
    monkeypatch.setenv("ESBRIDGE_HOME", str(tmp_path))
    assert check_plugin.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "esbridge engine install --distribution opensearch" in err
    assert "esbridge engine install --distribution elasticsearch8" in err


def test_a_refusal_for_a_limit_of_the_plugin_says_what_to_do() -> None:
    """The plugin's 400 for a request beyond one of its limits (at parsing, or from a shard) becomes
    an error naming the limit, the value and what to do; other errors are left as they are."""
    from esbridge.engine.calls import engine_error
    from esbridge.features.plugin import limit_error

    reason = ("[esbridge_features] asks for 120000 terms (groups and stats together), more than the limit "
              "[esbridge.features.max_terms] of 100000")
    parsing = engine_error(400, {"error": {"type": "illegal_argument_exception", "reason": reason,
                                           "root_cause": [{"type": "illegal_argument_exception", "reason": reason}]},
                                 "status": 400})
    from_shard = engine_error(400, {"error": {"type": "search_phase_execution_exception", "reason": "all shards failed",
                                              "root_cause": [{"type": "illegal_argument_exception", "reason": reason}]},
                                    "status": 400})
    for err in (parsing, from_shard):
        clear = limit_error(err, "docs")
        assert clear is not None and clear.status == 400 and clear.reason == reason
        message = str(clear)
        assert message.startswith("searching 'docs': the esbridge-features plugin refused")
        for part in (reason, "Shorten the query", "raise the node setting esbridge.features.max_terms",
                     "features='termvectors'", "ESBRIDGE_FEATURES_PLUGIN=off"):
            assert part in message
    other = engine_error(400, {"error": {"type": "illegal_argument_exception", "reason": "[esbridge_features] tag "
                                         "must be a string"}, "status": 400})
    assert limit_error(other, "docs") is None
    assert limit_error(engine_error(500, {"error": {"type": "x", "reason": reason}}), "docs") is None
