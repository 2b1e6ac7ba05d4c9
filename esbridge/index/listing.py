"""What esbridge indexed on an engine: every index whose mapping records esbridge's layout
(``_meta.esbridge``, see :mod:`esbridge.index.definitions`), with its aliases, document count,
layout and where its document vectors are (the engine's vector field, or esbridge's files on this
machine); on request, the engine's other indices too, marked as not esbridge's."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError
from esbridge.home import cache_dir
from esbridge.index.definitions import IndexLayout, layout_from_meta

__all__ = ["IndexEntry", "disk_vector_models", "list_indices", "render_table"]


@dataclass(frozen=True)
class IndexEntry:
    """One index of the engine.

    Attributes:
        name: the (concrete) index.
        aliases: the aliases naming it (an index ``esbridge index --recreate`` replaced answers
            to its name through one).
        status: ``"open"`` or ``"close"``.
        documents: its document count (``None`` for a closed index; see :func:`list_indices`).
        meta: its ``_meta.esbridge`` entries (empty: not made by esbridge).
        layout: the layout they record (``None`` if none, or one esbridge cannot read).
        disk_vectors: the models whose vectors of the index esbridge keeps on this machine's
            disk (:func:`disk_vector_models`), for an index without a vector field in the engine.
    """

    name: str
    aliases: tuple[str, ...]
    status: str
    documents: int | None
    meta: Mapping[str, Any]
    layout: IndexLayout | None
    disk_vectors: tuple[str, ...] = ()

    @property
    def esbridge(self) -> bool:
        """The index was made by esbridge (or given its channels by ``--add-channels``)."""
        return bool(self.meta)

    @property
    def vector(self) -> Mapping[str, Any] | None:
        """The dense-vector field the engine searches (``_meta.esbridge.vector``), if any."""
        vector = self.meta.get("vector")
        return vector if isinstance(vector, Mapping) else None

    def notes(self) -> list[str]:
        """What else the mapping says of the index, in words."""
        out = []
        if not self.esbridge:
            out.append("not esbridge's (a plain index: bm25, bmx and other base-channel scorers read it as it is)")
            return out
        if self.layout is None:
            out.append("esbridge's layout record cannot be read")
        replaces = self.meta.get("replaces")
        if isinstance(replaces, str) and replaces not in self.aliases:
            out.append(f"unfinished: was to replace {replaces!r}, which does not name it (delete it)")
        if self.meta.get("channels_added"):
            out.append("channels added in place")
        if self.layout is not None and not self.layout.term_vectors:
            out.append("no term vectors (lengths in the engine plugin's norms; opens only where it runs)")
        sims = self.meta.get("similarities")
        if isinstance(sims, Mapping) and sims:
            out.append(f"scripted similarities {', '.join(map(str, sims))}")
        if self.meta.get("eval"):
            out.append("evaluation index")
        return out

    def to_json(self) -> dict[str, Any]:
        layout = self.layout
        return {
            "index": self.name,
            "aliases": list(self.aliases),
            "status": self.status,
            "documents": self.documents,
            "esbridge": self.esbridge,
            "fields": list(layout.fields) if layout else None,
            "combined": layout.combined if layout else None,
            "channels": list(layout.channels) if layout else None,
            "field_channels": list(layout.field_channels) if layout else None,
            "id_field": layout.id_field if layout else None,
            "term_vectors": layout.term_vectors if layout else None,
            "vector": dict(self.vector) if self.vector else None,
            "disk_vectors": list(self.disk_vectors),
            "notes": self.notes(),
        }

    def vector_cell(self) -> str:
        """Where the index's document vectors are, for the table: the engine's field, ``disk``
        (with the models), or ``-``."""
        vector = self.vector
        if vector:
            return f"{vector.get('field')} ({vector.get('dim')}d, {vector.get('model')}" + (
                f", passages of {vector['passages']})" if vector.get("passages") else ")")
        if self.disk_vectors:
            return f"disk ({', '.join(self.disk_vectors)})"
        return "-"


def disk_vector_models(uuid: str, home: Path | None = None) -> tuple[str, ...]:
    """The models whose document vectors of the index ``uuid`` esbridge keeps on disk here
    (``$ESBRIDGE_HOME/vectors/<uuid>/<model>/meta.json``, written by
    :class:`esbridge.semantic.vectors.VectorIndex`), by name; a set that cannot be read is left out."""
    root = (home or cache_dir()) / "vectors" / uuid
    models = []
    try:
        folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    except OSError:
        return ()
    for folder in folders:
        try:
            meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        model = meta.get("model") if isinstance(meta, Mapping) else None
        if isinstance(model, str) and model and meta.get("uuid") == uuid and model not in models:
            models.append(model)
    return tuple(models)


def _layout(meta: Mapping[str, Any]) -> IndexLayout | None:
    try:
        return layout_from_meta(meta)
    except (ConfigurationError, KeyError, TypeError, ValueError):
        return None


def list_indices(engine: Engine, *, include_plain: bool = False, home: Path | None = None) -> list[IndexEntry]:
    """The indices esbridge made on ``engine`` (with ``include_plain``, every other index too but
    hidden ones and those whose name starts with a dot, the engine's own), by name.

    Three requests: the indices with their document counts and UUIDs (``_cat/indices``, which
    counts the objects of a ``nested`` field as documents too; esbridge's indices have none), their
    ``_meta.esbridge`` entries, and the aliases.  The vectors esbridge keeps on disk are looked up
    under ``home`` (default ``$ESBRIDGE_HOME``) by the indices' UUIDs.
    """
    listed = engine.request("GET", "/_cat/indices", params={"format": "json", "h": "index,status,docs.count,uuid",
                                                            "expand_wildcards": "open,closed"},
                            context="listing the engine's indices")
    status = {str(row["index"]): str(row.get("status") or "open") for row in listed}
    uuids = {str(row["index"]): str(row["uuid"]) for row in listed if row.get("uuid")}
    counts = {str(row["index"]): int(row["docs.count"]) for row in listed
              if str(row.get("docs.count") or "").isdigit()}
    if not status:
        return []
    mappings = engine.request("GET", "/_mapping", params={"filter_path": "*.mappings._meta.esbridge",
                                                          "expand_wildcards": "open,closed"},
                              context="reading the indices' esbridge layouts")
    metas: dict[str, dict[str, Any]] = {}
    for name, spec in (mappings or {}).items():
        meta = (((spec or {}).get("mappings") or {}).get("_meta") or {}).get("esbridge")
        if isinstance(meta, Mapping) and meta and name in status:
            metas[name] = dict(meta)
    names = sorted(n for n in status if n in metas or (include_plain and not n.startswith(".")))
    if not names:
        return []
    aliases: dict[str, list[str]] = {}
    for row in engine.request("GET", "/_cat/aliases", params={"format": "json", "h": "alias,index"},
                              context="listing the engine's aliases"):
        aliases.setdefault(str(row["index"]), []).append(str(row["alias"]))
    return [IndexEntry(name=n, aliases=tuple(sorted(aliases.get(n, []))), status=status[n], documents=counts.get(n),
                       meta=metas.get(n, {}), layout=_layout(metas[n]) if n in metas else None,
                       disk_vectors=disk_vector_models(uuids[n], home)
                       if n in metas and n in uuids and not metas[n].get("vector") else ())
            for n in names]


def _channels(layout: IndexLayout) -> str:
    text = ",".join(layout.channels)
    if tuple(layout.field_channels) != tuple(layout.channels):
        text += f" (each field: {','.join(layout.field_channels)})"
    return text


def render_table(entries: Sequence[IndexEntry]) -> str:
    """A readable table of ``entries``, one line each."""
    header = ("index", "aliases", "docs", "fields", "channels", "vector", "notes")
    rows = [header]
    for e in entries:
        layout = e.layout
        rows.append((
            e.name,
            ",".join(e.aliases) or "-",
            "closed" if e.status != "open" else ("?" if e.documents is None else str(e.documents)),
            ",".join(layout.fields) if layout else "-",
            _channels(layout) if layout else ("-" if not e.esbridge else "?"),
            e.vector_cell(),
            "; ".join(e.notes()),
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() + "\n" for row in rows)
