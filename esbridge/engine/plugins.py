"""Which of esbridge's engine plugins a cluster runs, asked of the cluster itself.

The plugin ``esbridge-features`` (built and installed by :mod:`esbridge.nodes.features_plugin`)
returns candidates' features with their hits (:mod:`esbridge.features.plugin` reads them), and from
version 1.3.0 has the similarity ``esbridge_bm25`` that indices without term vectors use
(:mod:`esbridge.index.definitions`).  These plans tell whether every node runs it.
"""

from __future__ import annotations

from collections.abc import Mapping

from esbridge.engine.client import EngineBase
from esbridge.engine.plan import Call, Plan
from esbridge.errors import EngineError

__all__ = ["CLASSNAME", "PLUGIN_NAME", "SIMILARITY_SINCE", "on_every_node_plan", "similarity_on_every_node_plan"]

PLUGIN_NAME = "esbridge-features"
CLASSNAME = "org.esbridge.features.FeaturesPlugin"


#: The first version of the plugin with the similarity ``esbridge_bm25`` (indices without term vectors).
SIMILARITY_SINCE = (1, 3, 0)


def on_every_node_plan(engine: EngineBase) -> Plan[bool]:
    """Whether every node of ``engine``'s cluster runs the plugin (``GET _nodes/plugins``, asked
    once per connection; ``False`` where listing the plugins is not allowed)."""
    return (yield from _plugin_plan(engine))[0]


def similarity_on_every_node_plan(engine: EngineBase) -> Plan[bool]:
    """Whether every node runs a version of the plugin that has the similarity ``esbridge_bm25``
    (a node that reports no version, as esbridge's local OpenSearch nodes, runs the one built here)."""
    return (yield from _plugin_plan(engine))[1]


def _version(text: object) -> tuple[int, ...] | None:
    try:
        return tuple(int(p) for p in str(text).split(".")[:3])
    except ValueError:
        return None


def _plugin_plan(engine: EngineBase) -> Plan[tuple[bool, bool]]:
    cached: tuple[bool, bool] | None = getattr(engine, "_features_plugin", None)
    if cached is None:
        try:
            resp = yield Call("GET", "/_nodes/plugins", params={"filter_path": "nodes.*.plugins"},
                              context="listing the cluster's plugins")
        except EngineError as err:
            if err.status not in (401, 403):
                raise
            resp = {}
        nodes = list((resp.get("nodes") or {}).values()) if isinstance(resp, Mapping) else []
        found = [[p for p in (n.get("plugins") or [])
                  if p.get("name") == PLUGIN_NAME or p.get("classname") == CLASSNAME] for n in nodes]
        everywhere = bool(nodes) and all(found)
        versions = [_version(p.get("version")) for ps in found for p in ps]
        cached = (everywhere, everywhere and all(v is None or v >= SIMILARITY_SINCE for v in versions))
        engine._features_plugin = cached  # type: ignore[attr-defined]
    return cached
