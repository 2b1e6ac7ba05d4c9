"""Where a new index's vectors go: in the engine wherever it can search them, else on disk with one
warning naming the cost (:func:`esbridge.semantic.engine_vectors.new_vector_field`)."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from esbridge.errors import ConfigurationError
from esbridge.semantic.engine_vectors import new_vector_field


def _engine(kind: str | None) -> Any:
    return SimpleNamespace(vector_search=lambda: kind, info=SimpleNamespace(label="Engine 1.0"))


def _encoder(*lengths: int) -> Any:
    return SimpleNamespace(name="m", dim=8, passage_lengths=lengths)


@pytest.mark.parametrize("kind", ["knn_vector", "dense_vector"])
def test_auto_and_engine_put_the_vectors_where_the_engine_searches_them(kind: str) -> None:
    for where in ("auto", "engine"):
        field = new_vector_field(_engine(kind), _encoder(64), where)
        assert field is not None and (field.type, field.passages, field.dim, field.model) == (kind, 64, 8, "m")
    assert new_vector_field(_engine(kind), _encoder(64), "disk") is None


def test_auto_keeps_them_on_disk_with_one_warning_where_the_engine_cannot(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert new_vector_field(_engine(None), _encoder(64)) is None
        assert new_vector_field(_engine("knn_vector"), _encoder(64, 128)) is None
    assert len(caplog.records) == 2
    assert "Engine 1.0 has no vector search" in caplog.records[0].getMessage()
    assert "several lengths (64, 128)" in caplog.records[1].getMessage()
    assert all("every client machine embeds every document" in r.getMessage() for r in caplog.records)


def test_engine_is_an_error_where_it_cannot_be_and_names_the_way_out() -> None:
    with pytest.raises(ConfigurationError, match=r"--vectors engine: Engine 1.0 has no vector search.*--vectors disk"):
        new_vector_field(_engine(None), _encoder(64), "engine")
    with pytest.raises(ConfigurationError, match="vectors must be one of auto, engine, disk, got 'gpu'"):
        new_vector_field(_engine(None), _encoder(64), "gpu")


def test_the_cli_names_the_default_local_node_the_engine_does() -> None:
    from esbridge.cli.options import DEFAULT_DISTRIBUTION, DISTRIBUTIONS
    from esbridge.nodes import artifacts

    assert DEFAULT_DISTRIBUTION == artifacts.DEFAULT_DISTRIBUTION and DISTRIBUTIONS == list(artifacts.RUNNERS)
    # the default node keeps and searches the vectors itself
    assert "org.opensearch.knn.plugin.KNNPlugin" in artifacts.runner_spec(DEFAULT_DISTRIBUTION).plugin_types
