"""An esbridge index without stored term vectors: its text fields' similarity keeps exact lengths in
the norms (the ``esbridge-features`` plugin's ``esbridge_bm25``), and the layout says so."""

from __future__ import annotations

from typing import Any

import pytest

from esbridge.engine.plan import Call
from esbridge.errors import ConfigurationError
from esbridge.index import IndexLayout
from esbridge.index.definitions import EXACT_SIMILARITY, EXACT_SIMILARITY_TYPE, build_index_body, layout_from_meta


def _analysed(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every text field and text sub-field of the body, by path."""
    out = {}
    for name, spec in body["mappings"]["properties"].items():
        if spec.get("type") == "text":
            out[name] = spec
            out.update({f"{name}.{k}": v for k, v in spec.get("fields", {}).items() if v.get("type") == "text"})
    return out


def test_the_default_stores_term_vectors_and_the_engines_own_bm25() -> None:
    body = build_index_body(IndexLayout())
    fields = _analysed(body)
    assert fields and all(f.get("term_vector") == "yes" and "similarity" not in f for f in fields.values())
    assert "similarity" not in body["settings"]
    assert body["mappings"]["_meta"]["esbridge"]["term_vectors"] is True


def test_without_term_vectors_every_channel_field_uses_the_exact_length_similarity() -> None:
    layout = IndexLayout(term_vectors=False)
    body = build_index_body(layout)
    fields = _analysed(body)
    channel_fields = {layout.subfield(f, ch) for f in (*layout.fields, layout.combined)
                      for ch in (layout.channels if f == layout.combined else layout.field_channels)}
    assert channel_fields <= fields.keys()
    for path, spec in fields.items():
        assert "term_vector" not in spec, path
        assert spec["similarity"] == EXACT_SIMILARITY, path
    # the norms hold the exact lengths: no token counts (the in-engine rescorer's) unless scripted
    # similarities are asked for
    assert all("length" not in spec.get("fields", {}) for spec in body["mappings"]["properties"].values())
    scripted = build_index_body(layout, similarity="evolved")["mappings"]["properties"][layout.combined]
    assert scripted["fields"]["length"]["type"] == "token_count"
    assert body["settings"]["similarity"] == {EXACT_SIMILARITY: {"type": EXACT_SIMILARITY_TYPE}}
    assert layout_from_meta(body["mappings"]["_meta"]["esbridge"]).term_vectors is False


def test_bm25_parameters_reach_the_exact_length_similarity_too() -> None:
    body = build_index_body(IndexLayout(term_vectors=False), bm25=(0.9, 0.4))
    sims = body["settings"]["similarity"]
    assert sims[EXACT_SIMILARITY] == {"type": EXACT_SIMILARITY_TYPE, "k1": 0.9, "b": 0.4}
    assert sims["default"] == {"type": "BM25", "k1": 0.9, "b": 0.4}


def test_scripted_similarity_fields_keep_their_own_similarity() -> None:
    body = build_index_body(IndexLayout(term_vectors=False), similarity="bm25_pyserini")
    text = body["mappings"]["properties"]["text"]["fields"]
    scripted = [k for k in text if k.startswith("base_")]
    assert scripted and all(text[k]["similarity"] != EXACT_SIMILARITY for k in scripted)


def test_indices_created_before_record_no_choice_and_store_term_vectors() -> None:
    meta = {"fields": ["title", "text"], "combined": "esb_all", "channels": ["base"]}
    assert layout_from_meta(meta).term_vectors is True


def test_a_plain_index_cannot_be_described_without_term_vectors() -> None:
    with pytest.raises(ConfigurationError, match="term_vectors=False describes only an index esbridge created"):
        IndexLayout(fields=("body",), channels=("base",), plain=True, search_analyzer="standard",
                    term_vectors=False)


def _plugins(*nodes: list[dict[str, str]]) -> tuple[bool, bool]:
    """(runs everywhere, has the similarity everywhere) for a ``_nodes/plugins`` answer."""
    from esbridge.engine import plugins

    class Client:
        pass

    plan = plugins._plugin_plan(Client())  # type: ignore[arg-type]
    call = next(plan)
    assert isinstance(call, Call) and call.path == "/_nodes/plugins"
    try:
        plan.send({"nodes": {f"n{i}": {"plugins": ps} for i, ps in enumerate(nodes)}})
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    raise AssertionError("the plan asked for more")


def test_the_similarity_is_used_only_where_every_node_has_a_plugin_that_defines_it() -> None:
    new = {"name": "esbridge-features", "version": "1.3.0"}
    old = {"name": "esbridge-features", "version": "1.2.0"}
    local = {"name": "org.esbridge.features.FeaturesPlugin", "classname": "org.esbridge.features.FeaturesPlugin",
             "version": "NA"}  # loaded from the class path by a local node: no version
    assert _plugins([new], [new]) == (True, True)
    assert _plugins([local]) == (True, True)
    assert _plugins([new], [old]) == (True, False)  # features through the plugin, term vectors still stored
    assert _plugins([new], []) == (False, False)
