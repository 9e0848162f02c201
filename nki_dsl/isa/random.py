"""Random-number instructions of the current ISA (reference/nki.md §2.7 "Random"): ``rng`` (random 32-bit words
truncated to an integer dtype's low bits; Vector, or GpSimd on NC-v3+), ``rand2`` (uniform in [min, max]; NC-v4
Vector) and ``set_rng_seed`` (seed from a ``[1, 1]`` tile). The backends model one generator per launch, the one
``nl.random_seed`` and dropout use, reset at every launch; they draw their own streams, not the hardware's."""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError
from nki_dsl.isa.arguments import engine_name, ints
from nki_dsl.isa.enums import Engine
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.tensor import build_op

RAND2_NC_VERSION = 4  # rand2 is "v4 Vector" (§2.7 Random)
RNG_GPSIMD_NC_VERSION = 3  # rng: "v2 Vector, v3+ Vector/GpSimd"


def rng(shape, dtype, *, engine=Engine.unknown):
    """A new tile of ``shape`` holding random bits: each element the low bits of a random 32-bit word."""
    op = "nisa.rng"
    name = dtypes.normalize(dtype)
    if dtypes.get(name).kind not in ("int", "uint") or dtypes.get(name).is_packed:
        raise NkiApiError(f"rng writes integer tiles (random bits), not {name}", caller_loc(), op)
    chosen = engine_name(op, engine)
    if chosen == "gpsimd" and current(op).target_fact("nc_version") < RNG_GPSIMD_NC_VERSION:
        raise NkiApiError("rng on the GpSimd engine needs NeuronCore-v3 or later", caller_loc(), op)
    return build_op(op, {}, {"shape": ints(op, "shape", shape), "engine": chosen}, dtype=name)


def rand2(shape, min, max, dtype="float32"):  # noqa: A002 - the instruction's parameter names
    """A new tile of ``shape``: fp32 uniform draws in [min, max] (numbers or ``[P, 1]`` tiles), cast to ``dtype``."""
    op = "nisa.rand2"
    version = current(op).target_fact("nc_version")
    if version < RAND2_NC_VERSION:
        raise NkiApiError(f"{op} runs on NeuronCore-v{RAND2_NC_VERSION} (trn3) only; this kernel is being traced "
                          f"for a NeuronCore-v{version} target", caller_loc(), op)  # fmt: skip
    return build_op(op, {"min": min, "max": max}, {"shape": ints(op, "shape", shape)}, dtype=dtype)


def set_rng_seed(src_seeds):
    """Seed the generator with the 32-bit value of ``src_seeds`` (a ``[1, 1]`` SBUF tile)."""
    op = "nisa.set_rng_seed"
    shape = getattr(src_seeds, "shape", None)
    if shape is not None and tuple(shape) != (1, 1):
        raise NkiApiError(f"src_seeds {list(shape)} must be a [1, 1] tile", caller_loc(), op)
    build_op(op, {"src_seeds": src_seeds})
