"""Painless artifacts: scripted similarities and stored scripts from ``painless/*.painless``.

Script text lives only in the ``.painless`` files shipped with the package (read with
:mod:`importlib.resources` from ``esbridge.resources``/``painless``); this module loads
them, builds the index settings of the scripted similarities and stores score scripts.

Scripted similarities (index setting ``index.similarity.<name>``, ``"type": "scripted"``),
each a weight script (per query term) and a score script (per term and document):

- ``bm25_pyserini``: Lucene BM25 with Pyserini's ``k1 = 0.9``, ``b = 0.4``, Lucene's IDF,
  no ``k1 + 1`` factor unless ``k1_plus_one`` (Lucene 8 / Elasticsearch 7 style);
- ``evolved``: the evolved formula's per-term evidence ``w(t) · ln(1 + tf) / B_len`` with
  the surprisal IDF and the clarity factor in ``w(t)``;
- ``bmx``: BMX's per-term part ``IDF · F(α+1)/(F + α|D|/avgdl + αĒ)``.

Painless's similarity and weight contexts have **no** ``params`` (both engines answer
``cannot resolve symbol [params.k1]``), so their numbers are declared in the files as
``double NAME = <literal>; // esbridge:constant <key>`` and :meth:`PainlessScript.with_constants`
rewrites exactly those literals with validated finite numbers.  Nothing else is ever
written into a script's source; query text reaches score scripts only through ``params``.

What each similarity cannot compute (a similarity sees one term at a time) is listed in
``painless/README.md``.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Any

from esbridge.engine.client import Engine
from esbridge.errors import ConfigurationError, EngineError, UnsupportedEngineError
from esbridge.scoring.common import IdfVariant
from esbridge.scoring.evolved import EvolvedParams

_EVOLVED_DEFAULTS = EvolvedParams()

__all__ = [
    "BM25SimilarityConstants",
    "BMXSimilarityConstants",
    "EvolvedSimilarityConstants",
    "PainlessScript",
    "ScriptedSimilarity",
    "SimilarityKind",
    "available_scripts",
    "SimilarityConstants",
    "failing_scripts",
    "put_stored_script",
    "require_painless",
    "resolve_similarities",
    "script_error",
    "scripted_similarity",
]

#: Package and folder the ``.painless`` files are read from.
RESOURCE_PACKAGE = "esbridge.resources"
RESOURCE_FOLDER = "painless"

_CONSTANT = re.compile(
    r"^(?P<head>\s*double\s+(?P<name>[A-Z][A-Z0-9_]*)\s*=\s*)(?P<value>[^;]+?)"
    r"(?P<tail>\s*;\s*//\s*esbridge:constant\s+(?P<key>[a-z][a-z0-9_]*)\s*)$"
)
_LITERAL = re.compile(r"^-?(?:\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)$")


def _painless_double(key: str, value: float) -> str:
    """``value`` as a Painless double literal, refusing anything that is not a finite number."""
    if isinstance(value, bool):
        value = 1.0 if value else 0.0
    if not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise ConfigurationError(f"similarity constant {key!r} must be a finite number, got {value!r}")
    text = repr(float(value))
    if not _LITERAL.match(text):  # pragma: no cover - repr of a finite float always matches
        raise ConfigurationError(f"similarity constant {key!r} has no Painless literal: {text!r}")
    return text


@dataclass(frozen=True)
class PainlessScript:
    """One ``.painless`` file: its name, source text and where it came from.

    Attributes:
        name: the file name, e.g. ``evolved.score.painless``.
        source: the script text.
        origin: where the file was read (default ``painless/<name>``), shown in errors.
    """

    name: str
    source: str
    origin: str = ""

    @property
    def location(self) -> str:
        """``origin``, or ``painless/<name>`` for a shipped script."""
        return self.origin or f"{RESOURCE_FOLDER}/{self.name}"

    @classmethod
    def load(cls, name: str) -> PainlessScript:
        """The shipped script ``painless/<name>``.

        Raises:
            ConfigurationError: no such file; the message lists the shipped ones.
        """
        path = resources.files(RESOURCE_PACKAGE).joinpath(RESOURCE_FOLDER, name)
        if not name.endswith(".painless") or not path.is_file():
            raise ConfigurationError(
                f"no Painless script {name!r} in painless/; available: {available_scripts()}"
            )
        return cls(name=name, source=path.read_text("utf-8"))

    @classmethod
    def from_file(cls, path: str | Path) -> PainlessScript:
        """A script from any file (e.g. one being developed); named by its file name."""
        p = Path(path)
        try:
            return cls(name=p.name, source=p.read_text("utf-8"), origin=str(p))
        except OSError as err:
            raise ConfigurationError(f"cannot read Painless script {str(p)!r}: {err}") from err

    @property
    def digest(self) -> str:
        """First 12 hex digits of the source's SHA-256 (names stored scripts by content)."""
        return hashlib.sha256(self.source.encode("utf-8")).hexdigest()[:12]

    @property
    def stored_id(self) -> str:
        """The id this script is stored under: ``esbridge-<file stem>-<digest>``."""
        stem = self.name.removesuffix(".painless").replace(".", "-")
        return f"esbridge-{stem}-{self.digest}"

    def constants(self) -> dict[str, float]:
        """The ``esbridge:constant`` declarations: key -> the literal's value."""
        out = {}
        for line in self.source.splitlines():
            m = _CONSTANT.match(line)
            if m:
                out[m.group("key")] = float(m.group("value"))
        return out

    def with_constants(self, values: Mapping[str, float]) -> PainlessScript:
        """This script with its ``esbridge:constant`` literals replaced by ``values``.

        Only keys the file declares are accepted; a declared key not in ``values`` keeps
        the file's literal.

        Raises:
            ConfigurationError: an unknown key, or a value that is not a finite number.
        """
        declared = self.constants()
        unknown = sorted(set(values) - set(declared))
        if unknown:
            raise ConfigurationError(
                f"{self.name} has no constants {unknown}; it declares {sorted(declared)}"
            )
        literals = {k: _painless_double(k, v) for k, v in values.items()}
        lines = []
        for line in self.source.splitlines(keepends=True):
            text = line.rstrip("\r\n")
            ending = line[len(text):]
            m = _CONSTANT.match(text)
            if m and m.group("key") in literals:
                text = m.group("head") + literals[m.group("key")] + m.group("tail")
            lines.append(text + ending)
        return PainlessScript(name=self.name, source="".join(lines), origin=self.origin)

    def inline(self) -> dict[str, Any]:
        """The script object ``{"lang": "painless", "source": ...}``."""
        return {"lang": "painless", "source": self.source}


def available_scripts() -> list[str]:
    """The ``.painless`` files shipped in ``painless/``."""
    folder = resources.files(RESOURCE_PACKAGE).joinpath(RESOURCE_FOLDER)
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".painless"))


# ---------------------------------------------------------------------------
# Scripted similarities
# ---------------------------------------------------------------------------


class SimilarityKind(str, Enum):
    """The scripted similarities esbridge ships (file stem in ``painless/``)."""

    BM25_PYSERINI = "bm25_pyserini"
    EVOLVED = "evolved"
    BMX = "bmx"

    @classmethod
    def parse(cls, value: str | SimilarityKind) -> SimilarityKind:
        """``value`` as a kind; an unknown name raises an error listing the valid ones."""
        if isinstance(value, SimilarityKind):
            return value
        try:
            return cls(value)
        except ValueError:
            raise ConfigurationError(
                f"unknown scripted similarity {value!r}; choose one of {[k.value for k in cls]}"
            ) from None


def _check_finite(owner: object, *names: str, minimum: float | None = None) -> None:
    for name in names:
        value = getattr(owner, name)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or (minimum is not None and value < minimum):
            bound = f" and >= {minimum}" if minimum is not None else ""
            raise ConfigurationError(
                f"{type(owner).__name__}.{name} must be a finite number{bound}, got {value!r}"
            )


@dataclass(frozen=True)
class BM25SimilarityConstants:
    """Constants of ``bm25_pyserini``.

    Attributes:
        k1: term-frequency saturation (Pyserini: 0.9).
        b: length normalisation in ``[0, 1]`` (Pyserini: 0.4).
        k1_plus_one: multiply by ``k1 + 1`` as Lucene 8 (Elasticsearch 7.x) does; off by
            default, as Lucene >= 9 and Pyserini on it.
    """

    k1: float = 0.9
    b: float = 0.4
    k1_plus_one: bool = False

    def __post_init__(self) -> None:
        _check_finite(self, "k1", minimum=0.0)
        _check_finite(self, "b", minimum=0.0)
        if self.b > 1.0:
            raise ConfigurationError(f"BM25SimilarityConstants.b must be in [0, 1], got {self.b!r}")
        if not isinstance(self.k1_plus_one, bool):
            raise ConfigurationError(
                f"BM25SimilarityConstants.k1_plus_one must be a bool, got {self.k1_plus_one!r}"
            )

    def values(self) -> dict[str, float]:
        return {"k1": float(self.k1), "b": float(self.b), "k1_plus_one": float(self.k1_plus_one)}


@dataclass(frozen=True)
class EvolvedSimilarityConstants:
    """Constants of ``evolved`` (the per-term parts of :class:`~esbridge.scoring.evolved.EvolvedParams`).

    ``w(t) = boost · alpha_qtf · IDF · (IDF/(IDF+1))^gamma_e · (IDF/(IDF+gamma))^beta_tf``,
    score ``w(t) · ln(1 + tf) / (1 + alpha_len · ln(1 + (|d|+1)/(avgdl+1)))``.
    """

    # the defaults are EvolvedParams' (tuned, see esbridge/scoring/evolved.py), so that
    # from_params(EvolvedParams()) == EvolvedSimilarityConstants()
    alpha_qtf: float = _EVOLVED_DEFAULTS.alpha_qtf
    gamma_e: float = _EVOLVED_DEFAULTS.gamma_e
    gamma: float = _EVOLVED_DEFAULTS.gamma
    beta_tf: float = _EVOLVED_DEFAULTS.beta_tf
    alpha_len: float = _EVOLVED_DEFAULTS.alpha_len
    idf: IdfVariant = _EVOLVED_DEFAULTS.idf

    def __post_init__(self) -> None:
        _check_finite(self, "alpha_qtf", "gamma_e", "beta_tf", "alpha_len", minimum=0.0)
        _check_finite(self, "gamma")
        if self.gamma <= 0.0:
            raise ConfigurationError(f"EvolvedSimilarityConstants.gamma must be > 0, got {self.gamma!r}")
        try:
            object.__setattr__(self, "idf", IdfVariant(self.idf))
        except ValueError:
            raise ConfigurationError(
                f"EvolvedSimilarityConstants.idf must be one of {[v.value for v in IdfVariant]}, "
                f"got {self.idf!r}"
            ) from None

    @classmethod
    def from_params(cls, params: Any) -> EvolvedSimilarityConstants:
        """The per-term constants of an :class:`~esbridge.scoring.evolved.EvolvedParams`."""
        return cls(alpha_qtf=params.alpha_qtf, gamma_e=params.gamma_e, gamma=params.gamma,
                   beta_tf=params.beta_tf, alpha_len=params.alpha_len, idf=params.idf)

    def values(self) -> dict[str, float]:
        return {"alpha_qtf": float(self.alpha_qtf), "gamma_e": float(self.gamma_e),
                "gamma": float(self.gamma), "beta_tf": float(self.beta_tf),
                "alpha_len": float(self.alpha_len),
                "lucene_idf": 1.0 if self.idf is IdfVariant.LUCENE else 0.0}


@dataclass(frozen=True)
class BMXSimilarityConstants:
    """Constants of ``bmx``.

    Attributes:
        alpha: ``α >= 0``; ``None`` is the paper's ``max(min(1.5, avgdl/100), 0.5)``,
            computed in the script from the field's statistics.
        mean_entropy: ``Ē``, fixed for the whole index (default 1.0: its value for a
            one-term query and its upper bound).  The per-query ``Ē`` cannot reach a
            similarity: there are no ``params``, and ``query.boost`` cannot carry it because
            Lucene merges a repeated query term into one clause with the boosts summed.
    """

    alpha: float | None = None
    mean_entropy: float = 1.0

    def __post_init__(self) -> None:
        if self.alpha is not None:
            _check_finite(self, "alpha", minimum=0.0)
        _check_finite(self, "mean_entropy", minimum=0.0)

    def values(self) -> dict[str, float]:
        return {"alpha": -1.0 if self.alpha is None else float(self.alpha),
                "mean_entropy": float(self.mean_entropy)}


SimilarityConstants = BM25SimilarityConstants | EvolvedSimilarityConstants | BMXSimilarityConstants

_CONSTANT_TYPES: dict[SimilarityKind, type[Any]] = {
    SimilarityKind.BM25_PYSERINI: BM25SimilarityConstants,
    SimilarityKind.EVOLVED: EvolvedSimilarityConstants,
    SimilarityKind.BMX: BMXSimilarityConstants,
}

#: Channel whose analyzer the similarity sub-fields use.
SIMILARITY_CHANNEL = "base"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class ScriptedSimilarity:
    """A scripted similarity ready for an index: its scripts with constants filled in.

    Attributes:
        name: short name; the similarity is ``esb_<name>`` in the index settings and
            every text field gets the sub-field ``<field>.base_<name>`` using it.
        kind: which shipped formula.
        constants: the constants written into the scripts.
        weight_script: the weight script (per query term).
        script: the score script (per term and document).
    """

    name: str
    kind: SimilarityKind
    constants: SimilarityConstants
    weight_script: PainlessScript
    script: PainlessScript
    values: Mapping[str, float] = field(default_factory=dict)

    @property
    def settings_name(self) -> str:
        """The similarity's name in ``index.similarity``."""
        return f"esb_{self.name}"

    @property
    def subfield(self) -> str:
        """Sub-field suffix: ``<field>.<subfield>`` is scored with this similarity."""
        return f"{SIMILARITY_CHANNEL}_{self.name}"

    def scripts(self) -> tuple[PainlessScript, PainlessScript]:
        return (self.weight_script, self.script)

    def settings(self) -> dict[str, Any]:
        """The ``index.similarity.<settings_name>`` object."""
        return {
            "type": "scripted",
            "weight_script": {"source": self.weight_script.source},
            "script": {"source": self.script.source},
        }

    def field_mapping(self, analyzer: str) -> dict[str, Any]:
        """The sub-field: ``analyzer`` (the base channel's) scored with this similarity."""
        return {"type": "text", "analyzer": analyzer, "similarity": self.settings_name}

    def meta(self) -> dict[str, Any]:
        """What the index's ``_meta.esbridge.similarities`` records about it."""
        return {
            "kind": self.kind.value,
            "similarity": self.settings_name,
            "subfield": self.subfield,
            "constants": dict(self.values),
            "scripts": [f"{s.name}@{s.digest}" for s in self.scripts()],
        }


def scripted_similarity(
    kind: str | SimilarityKind,
    constants: SimilarityConstants | None = None,
    *,
    name: str | None = None,
    weight_script: PainlessScript | None = None,
    script: PainlessScript | None = None,
) -> ScriptedSimilarity:
    """Build a scripted similarity from ``painless/<kind>.weight.painless`` and
    ``painless/<kind>.score.painless``.

    Args:
        kind: ``bm25_pyserini``, ``evolved`` or ``bmx``.
        constants: the kind's constants dataclass (default: its defaults).
        name: short name (default: the kind); must differ between similarities of one index.
        weight_script, script: replacement scripts (e.g. a file under development); each
            gets the constants it declares.

    Raises:
        ConfigurationError: unknown kind, constants of another kind, or a bad name.
    """
    kind = SimilarityKind.parse(kind)
    expected = _CONSTANT_TYPES[kind]
    if constants is None:
        constants = expected()
    if not isinstance(constants, expected):
        raise ConfigurationError(
            f"similarity {kind.value!r} takes {expected.__name__}, got {type(constants).__name__}"
        )
    name = kind.value if name is None else name
    if not _NAME.match(name):
        raise ConfigurationError(
            f"similarity name {name!r} must start with a lowercase letter and hold only a-z, 0-9 and _"
        )
    values = constants.values()
    weight = weight_script or PainlessScript.load(f"{kind.value}.weight.painless")
    score = script or PainlessScript.load(f"{kind.value}.score.painless")
    filled = []
    for s in (weight, score):
        declared = s.constants()
        filled.append(s.with_constants({k: v for k, v in values.items() if k in declared}))
    return ScriptedSimilarity(name=name, kind=kind, constants=constants, weight_script=filled[0],
                              script=filled[1], values=values)


def resolve_similarities(
    spec: str | SimilarityKind | ScriptedSimilarity | Sequence[str | SimilarityKind | ScriptedSimilarity] | None,
) -> tuple[ScriptedSimilarity, ...]:
    """Similarities from a name, a :class:`ScriptedSimilarity`, or a sequence of them.

    Raises:
        ConfigurationError: an unknown name or two similarities with the same name.
    """
    if spec is None:
        return ()
    items: Sequence[str | SimilarityKind | ScriptedSimilarity]
    if isinstance(spec, (str, ScriptedSimilarity)):
        items = [spec]
    else:
        items = list(spec)
    out = []
    for item in items:
        out.append(item if isinstance(item, ScriptedSimilarity) else scripted_similarity(item))
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise ConfigurationError(
            f"similarity names must be unique within an index, got {names}; pass name=... to "
            "scripted_similarity for a second similarity of the same kind"
        )
    return tuple(out)


# ---------------------------------------------------------------------------
# Errors and stored scripts
# ---------------------------------------------------------------------------


def _error_nodes(body: Any) -> list[Mapping[str, Any]]:
    """Every error object in an engine error body (root causes, causes, shard failures)."""
    out: list[Mapping[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            out.append(node)
            for key in ("error", "caused_by", "reason"):
                if isinstance(node.get(key), Mapping):
                    walk(node[key])
            for key in ("root_cause", "failed_shards"):
                for child in node.get(key) or []:
                    walk(child)

    walk(body)
    return out


def failing_scripts(err: EngineError, scripts: Sequence[PainlessScript]) -> list[PainlessScript]:
    """The scripts among ``scripts`` whose source the engine's error quotes.

    Painless errors carry the failing script's source (``"script"``); an engine that
    quotes only part of it is matched on the quoted text.
    """
    quoted = {str(n["script"]) for n in _error_nodes(err.body) if n.get("script")}
    found = []
    for s in scripts:
        if any(q and (q == s.source or q in s.source) for q in quoted):
            found.append(s)
    return found


def script_error(err: EngineError, scripts: Sequence[PainlessScript], *, action: str) -> EngineError:
    """``err`` re-raised with the failing script's file name and Painless's ``script_stack``.

    Args:
        err: the engine's error.
        scripts: the scripts the request carried.
        action: what was being done, e.g. ``"creating index 'x'"``.
    """
    culprits = failing_scripts(err, scripts) or (list(scripts) if len(scripts) == 1 else [])
    where = ", ".join(s.location for s in culprits) or "one of " + ", ".join(
        s.location for s in scripts)
    message = f"{action}: Painless script {where} was rejected: {err.error_type}: {err.reason}"
    causes = [n.get("reason") for n in _error_nodes(err.body)
              if isinstance(n.get("reason"), str) and n.get("reason") != err.reason]
    if causes:
        message += f" (caused by: {causes[-1]})"
    if err.script_stack:
        message += "\nscript_stack:\n  " + "\n  ".join(err.script_stack)
    return EngineError(message, status=err.status, error_type=err.error_type, reason=err.reason,
                       root_cause=err.root_cause, index=err.index, script_stack=err.script_stack,
                       body=err.body)


def require_painless(engine: Engine, doing: str) -> None:
    """Raise a one-line :class:`UnsupportedEngineError` when ``engine`` has no Painless.

    Args:
        doing: what needed it, e.g. ``"rescore inside the engine"``.
    """
    if not engine.has_painless():
        raise UnsupportedEngineError(
            f"{engine.info.label} has no Painless (its lang-painless module is not installed), so esbridge "
            f"cannot {doing}; rerank with esbridge instead (Reranker, esbridge search), which needs no script"
        )


def put_stored_script(engine: Engine, script: PainlessScript, *, context: str = "score") -> str:
    """Store ``script`` (compiled once, against ``context``) unless it is already stored.

    The id is content-addressed (:attr:`PainlessScript.stored_id`), so a changed file is a
    new id and an unchanged one is not compiled again.

    Returns:
        The stored script's id.

    Raises:
        EngineError: the engine rejected the script; the message names the file and
            carries Painless's ``script_stack``.
    """
    require_painless(engine, f"store the script {script.location}")
    script_id = script.stored_id
    try:
        found = engine.request("GET", f"/_scripts/{script_id}", context=f"reading stored script {script_id}")
    except EngineError as err:
        if err.status != 404:
            raise
        found = {}
    stored = (found or {}).get("script") or {}
    if found.get("found") and stored.get("source") == script.source:
        return script_id
    try:
        engine.request("PUT", f"/_scripts/{script_id}/{context}", body={"script": script.inline()},
                       context=f"storing {script.location}")
    except EngineError as err:
        raise script_error(err, [script], action=f"storing script {script_id}") from err
    return script_id
