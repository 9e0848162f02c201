"""The enumerations of the current ``nki.isa`` with their 0.6 values (reference/nki.md §2.7 "Enums"), which differ
from legacy's: ``engine`` gains ``dma``, ``reduce_cmd`` gains ``load_reduce`` and renumbers, ``dge_mode`` renumbers,
``dma_engine`` is new. Wrappers hand the legacy front end a member's *name*, so the IR records the same strings.
Raw ints are rejected (0.3.0), which ``member()`` enforces."""

from __future__ import annotations

from enum import Enum, IntEnum

from nki_dsl.errors import NkiApiError
from nki_dsl.trace.builder import caller_loc


class engine(IntEnum):  # noqa: N801 - NKI spells its enums in lower case
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


class reduce_cmd(IntEnum):  # noqa: N801
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(IntEnum):  # noqa: N801
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(IntEnum):  # noqa: N801
    error = 0
    skip = 1


class dma_engine(IntEnum):  # noqa: N801
    dma = 1
    gpsimd_dma = 2


class matmul_perf_mode(Enum):  # noqa: N801
    none = "none"
    double_row = "double_row"


class nc_version(IntEnum):  # noqa: N801
    """NeuronCore generation: gen2 (Trn1/Inf2), gen3 (Trn2), gen4 (Trn3)."""

    gen2 = 2
    gen3 = 3
    gen4 = 4


def member(api: str, arg: str, value, enum: type[Enum]) -> str:
    """The name of an enum argument. Members of this module's enum or of the legacy enum of the same name are
    accepted (kernels mixing ``neuronxcc.nki.isa`` constants keep working); raw ints are not (0.3.0)."""
    if isinstance(value, enum):
        return value.name
    same_enum = isinstance(value, Enum) and type(value).__name__.lower() == enum.__name__.replace("_", "")
    if same_enum and value.name in enum.__members__:
        return value.name
    names = ", ".join(f"nisa.{enum.__name__}.{n}" for n in enum.__members__)
    raise NkiApiError(f"{arg}={value!r} is not a nisa.{enum.__name__} member (one of {names})", caller_loc(), api)
