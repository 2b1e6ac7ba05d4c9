"""The search spaces of the scorers' parameters, for ``esbridge tune``.

Kept free of other imports, so that the command line can list them in ``esbridge tune
--help`` without loading the scorers.  :mod:`esbridge.evaluation.tune` searches them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from esbridge.errors import ConfigurationError

__all__ = ["FIELD_DEFAULTS", "NOT_SEARCHED", "SEARCH_SPACES", "Dimension", "describe_spaces", "space_for"]


@dataclass(frozen=True)
class Dimension:
    """One searched parameter: its range and how it is searched.

    Attributes:
        seeded: a published value (docs/scoring.md §5.7, §6): searched only with
            ``space="all"``, unless the scorer leaves no value open.
        integer: searched over the integers of ``[low, high]``.
        per_field: the parameter holds ``(field, value)`` pairs (BM25F): the search has one
            dimension ``<name>.<field>`` per text field of the training features.
    """

    name: str
    low: float
    high: float
    log: bool = False
    seeded: bool = False
    integer: bool = False
    per_field: bool = False


def _seeded(*dims: Dimension) -> tuple[Dimension, ...]:
    return tuple(replace(d, seeded=True) for d in dims)


_K1 = Dimension("k1", 0.2, 3.0)
_B = Dimension("b", 0.0, 1.0)
_BMX = (Dimension("alpha", 0.2, 3.0, log=True), Dimension("beta", 0.0, 1.5))

#: Parameters searched per scorer.  ``seeded`` dimensions are values a publication fixes,
#: searched only with ``space="all"`` (docs/scoring.md §5.7); the others are the values it
#: leaves open (or, for BM25 and its relatives, the model's free parameters).  Architecture
#: A publishes every value, so its ``open`` space is all of them.
SEARCH_SPACES: Mapping[str, tuple[Dimension, ...]] = {
    "evolved": (
        Dimension("alpha_qtf", 0.02, 5.0, log=True),
        Dimension("gamma", 0.01, 10.0, log=True),
        Dimension("beta_tf", 0.0, 3.0),
        Dimension("beta_spec", 0.0, 1.0),
        Dimension("floor", 1.0, 300.0, log=True),
        Dimension("alpha_anc", 0.0, 1.5),
        Dimension("w_bi", 0.0, 1.0),
        Dimension("w_mic", 0.0, 0.8),
        *_seeded(
            Dimension("gamma_e", 0.0, 3.0),
            Dimension("gamma_cov", 0.0, 1.5),
            Dimension("w_pfx", 0.0, 1.5),
            Dimension("alpha_len", 0.0, 2.0),
            Dimension("gamma_coord", 0.5, 5.0),
            Dimension("pi_anchor", 2.0, 7.0),
            Dimension("c_spec", 1.0, 10.0),
        ),
    ),
    # BMX leaves α and β open: None is eq. 3's value computed from avgdl and N (docs/scoring.md §4.3)
    "bmx": _BMX,
    "bmx_normalized": _BMX,
    "bm25": (_K1, _B),
    "bm25_normalized": (_K1, _B),
    "bm25_robertson": (_K1, _B),
    "bm25_atire": (_K1, _B),
    "bm25l": (_K1, _B, Dimension("delta", 0.0, 2.0)),
    "bm25plus": (_K1, _B, Dimension("delta", 0.0, 2.0)),
    # BM25F: one weight (and, for Robertson-Zaragoza, one b) per text field (docs/scoring.md §3)
    "bm25f_pubmed": (_K1, _B, Dimension("field_weights", 0.1, 10.0, log=True, per_field=True)),
    "bm25f_robertson": (
        _K1,
        Dimension("field_weights", 0.1, 10.0, log=True, per_field=True),
        Dimension("field_b", 0.0, 1.0, per_field=True),
    ),
    # Architecture A: every value published (docs/scoring.md §6.1)
    "arch_a": _seeded(
        Dimension("tf_log_base", 0.1, 10.0, log=True),
        Dimension("clarity_power", 0.0, 3.0),
        Dimension("coverage_gamma", 0.0, 1.5),
        Dimension("dl_alpha", 0.0, 2.0),
        Dimension("prefix_weight", 0.0, 1.5),
    ),
    # Architectures B and C: k1 and b are esbridge's choice (the BM25 baseline's), the rest
    # published (docs/scoring.md §6.2, §6.3)
    "arch_b": (
        _K1,
        _B,
        *_seeded(
            Dimension("idf_power", 0.5, 2.0),
            Dimension("focus_mix", 0.0, 1.0),
            Dimension("spec_floor", 0.0, 1.0),
            Dimension("spec_power", 0.0, 3.0),
            Dimension("common_df_cut", 0.0, 0.5),
            Dimension("common_penalty", 0.0, 1.0),
            Dimension("coord_alpha", 0.0, 1.5),
            Dimension("coord_beta", 0.0, 2.0),
            Dimension("pair_boost", 0.0, 0.5),
            Dimension("pair_rel", 0.0, 1.0),
        ),
    ),
    "arch_c": (
        _K1,
        _B,
        *_seeded(
            Dimension("tf_idf_gamma", 0.0, 1.0),
            Dimension("tf_df_delta", 0.0, 1.0),
            Dimension("idf_lift_power", 0.0, 1.5),
            Dimension("q_drop_min_len", 2, 16, integer=True),
            Dimension("q_drop_df_ratio", 0.02, 1.0),
            Dimension("entropy_floor", 0.0, 1.0),
            Dimension("entropy_power", 0.0, 3.0),
            Dimension("spec_floor", 0.0, 1.0),
            Dimension("spec_power", 0.0, 3.0),
            Dimension("anchor_mix_alpha", 0.0, 1.0),
            Dimension("anchor_mix_power", 0.0, 4.0),
            Dimension("anchor_residual", 0.0, 1.0),
            Dimension("anchor_floor", 0.0, 1.0),
            Dimension("info_cov_alpha", 0.0, 1.0),
            Dimension("info_cov_gamma", 0.0, 2.0),
            Dimension("info_cov_tf_gamma", 0.0, 2.0),
            Dimension("salience_alpha", 0.0, 1.0),
            Dimension("salience_power", 0.0, 2.0),
        ),
    ),
}

#: Numeric parameters deliberately not searched, with the reason (a unit test checks that
#: every numeric parameter of every registered scorer is searched or listed here).
NOT_SEARCHED: Mapping[str, Mapping[str, str]] = {
    "evolved": {"pi_l": "read only with the micro gate (mic_gate), which is off",
                "mu_m": "read only with the micro gate (mic_gate), which is off"},
    "bm25f_pubmed": {"default_weight": "every text field has its own weight dimension"},
    "bm25f_robertson": {"default_weight": "every text field has its own weight dimension",
                        "default_b": "every text field has its own b dimension"},
}

#: For a per-field parameter, the parameter holding the value of a field it does not list.
FIELD_DEFAULTS = {"field_weights": "default_weight", "field_b": "default_b"}


def space_for(scorer: str, space: str = "open", fixed: Mapping[str, float | None] | None = None,
              text_fields: Sequence[str] | None = None) -> list[Dimension]:
    """The dimensions searched for ``scorer`` (``space``: ``open`` or ``all``), less ``fixed`` ones.

    ``open`` is the values the publication leaves open, or all of them for a scorer that
    leaves none open (architecture A).  A per-field dimension becomes one dimension
    ``<name>.<field>`` per field of ``text_fields``; without ``text_fields`` it is returned
    as it is (``per_field`` set), to be expanded once the features are known.
    """
    if scorer not in SEARCH_SPACES:
        raise ConfigurationError(f"no search space for scorer {scorer!r}; tunable: {', '.join(SEARCH_SPACES)}")
    if space not in ("open", "all"):
        raise ConfigurationError(f"space must be 'open' or 'all', got {space!r}")
    dims = [d for d in SEARCH_SPACES[scorer] if space == "all" or not d.seeded] or list(SEARCH_SPACES[scorer])
    fixed = fixed or {}
    out: list[Dimension] = []
    for d in dims:
        if d.per_field and text_fields is not None:
            out += [replace(d, name=f"{d.name}.{f}", per_field=False) for f in text_fields
                    if f"{d.name}.{f}" not in fixed]
        elif d.name not in fixed:
            out.append(d)
    return out


def describe_spaces(width: int = 100) -> str:
    """Each scorer's searched parameters, as ``esbridge tune --help`` lists them."""
    import textwrap

    lines = [textwrap.fill("search spaces (--space open; with --space all also the names after '+'; "
                           "NAME.FIELD: one dimension per text field):", width)]
    for scorer, dims in SEARCH_SPACES.items():
        def label(d: Dimension) -> str:
            return f"{d.name}.FIELD" if d.per_field else d.name

        open_ = [label(d) for d in dims if not d.seeded]
        seeded = [label(d) for d in dims if d.seeded]
        text = ", ".join(open_) + (f"; + {', '.join(seeded)}" if open_ and seeded else "")
        if not open_:
            text = ", ".join(seeded) + " (all published: searched with either space)"
        lines.append(textwrap.fill(text, width, initial_indent=f"  {scorer}: ",
                                   subsequent_indent=" " * (len(scorer) + 4)))
    return "\n".join(lines)
