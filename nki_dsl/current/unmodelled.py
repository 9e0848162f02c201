"""Names of the 0.6 API (reference/nki.md §2.6 lists them) that nki_dsl does not model, and why. Each resolves
(``from nki.isa import topk`` works, so unmodified code imports) to a function that raises ``NkiApiError`` with
the reason when a kernel calls it: a kernel never runs with an instruction silently missing."""

from __future__ import annotations

from nki_dsl.errors import NkiApiError
from nki_dsl.trace.builder import caller_loc

_NO_SEMANTICS = "reference/nki.md names it (§2.6) but does not give its semantics"

ISA = {
    "activate2": _NO_SEMANTICS + " (Trn3 ScalarE); use nisa.activation",
    "nc_n_gather": _NO_SEMANTICS,
    "nonzero_with_count": _NO_SEMANTICS,
    "topk": "reference/nki.md §2.7 does not say which partitions of val_dst / idx_dst each 16-partition group of "
            "src fills; use nisa.max8 / nisa.nc_find_index8 for the 8 largest",
    "rand_set_state": "the layout of the generator state is not documented; seed with nisa.set_rng_seed",
    "rand_get_state": "the layout of the generator state is not documented",
    "get_nc_sub_version": "the revision of each target is not documented; use nisa.get_nc_version",
}  # fmt: skip

LANGUAGE = {
    "rand": _NO_SEMANTICS + "; use nisa.rand2 (trn3) or nisa.rng",
    "gather_flattened": _NO_SEMANTICS,
    "abs_max": "an ALU operator of §2.7 [SH] whose formula reference/nki.md does not give",
    "abs_min": "an ALU operator of §2.7 [SH] whose formula reference/nki.md does not give",
    "prelu": "an activation of §2.7 [SH] whose slope parameter reference/nki.md does not give",
    "gelu_apprx_sigmoid_dx": "an activation whose formula reference/nki.md does not give",
}  # fmt: skip


def refusal(namespace: str, name: str, why: str):
    api = f"{namespace}.{name}"

    def refuse(*args, **kwargs):
        raise NkiApiError(f"{api} is not modelled by nki_dsl: {why}", caller_loc(), api)

    refuse.__name__ = refuse.__qualname__ = name
    refuse.__doc__ = f"Not modelled: {why}."
    refuse.__nki_refusal__ = f"{api} is not modelled by nki_dsl: {why}"  # said where it is passed as an op
    return refuse


def module_getattr(namespace: str, module: str, table: dict[str, str]):
    """A module ``__getattr__`` resolving the names of ``table`` to refusals."""

    def getattr_(name: str):
        if name in table:
            return refusal(namespace, name, table[name])
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return getattr_
