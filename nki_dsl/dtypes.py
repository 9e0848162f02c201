"""The dtype table: every dtype the language knows, its NumPy storage type and NKI's promotion rules.

Dtypes are named by their NKI names (``float32``, ``bfloat16``, ...). Users may pass any object ``np.dtype``
understands (``nl.bfloat16``, ``np.float16``, ``"float32"``, ``a.dtype``); ``normalize`` maps it to a name once,
at the boundary, and everything inside uses names.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from nki_dsl.errors import NkiApiError


@dataclass(frozen=True)
class DType:
    name: str
    np_dtype: np.dtype
    kind: str  # "float", "int", "uint" or "bool"
    short: str  # the spelling used in IR text
    # Values one element packs: 4 for the MX storage types (``float8_e4m3fn_x4`` ...), 1 for every other dtype.
    lanes: int = 1
    # The dtype users see, where it is not the storage type (the packed types: a distinct NumPy dtype, so that
    # ``t.dtype == nl.float8_e4m3fn_x4`` holds and arrays of it are recognised; their storage is raw bits).
    public: np.dtype | None = None

    @property
    def itemsize(self) -> int:
        return self.np_dtype.itemsize

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_packed(self) -> bool:
        """An MX storage type: raw bits holding ``lanes`` narrow floats; only moved, never computed on."""
        return self.lanes > 1

    @property
    def user_dtype(self) -> np.dtype:
        return self.public if self.public is not None else self.np_dtype


def _packed(name: str, storage) -> DType:
    """An MX packed type (reference/nki.md §2.7 "dtypes", [MX]): one element = 4 values consecutive along the
    contraction; ``float8_*_x4`` is a 32-bit element, ``float4_e2m1fn_x4`` a 16-bit one. Shapes count packed
    elements. Stored as the raw unsigned integer of its width (kind ``uint``: copies move bits exactly), shown to
    users as a one-field structured NumPy dtype named after it."""
    return DType(name, np.dtype(storage), "uint", name.replace("float", "f").replace("_", ""), lanes=4,
                 public=np.dtype([(name, storage)]))


_TABLE = [
    DType("float32", np.dtype(np.float32), "float", "f32"),
    DType("bfloat16", np.dtype(ml_dtypes.bfloat16), "float", "bf16"),
    DType("float16", np.dtype(np.float16), "float", "f16"),
    DType("tfloat32", np.dtype(np.float32), "float", "tf32"),
    DType("float8_e4m3", np.dtype(ml_dtypes.float8_e4m3fn), "float", "f8e4m3"),
    DType("float8_e5m2", np.dtype(ml_dtypes.float8_e5m2), "float", "f8e5m2"),
    # MX scale: an unsigned 8-bit exponent, value 2^(e - 127), 0xFF NaN (§2.7 "dtypes"); ml_dtypes has it.
    DType("float8_e8m0fnu", np.dtype(ml_dtypes.float8_e8m0fnu), "float", "f8e8m0"),
    DType("int32", np.dtype(np.int32), "int", "i32"),
    DType("int16", np.dtype(np.int16), "int", "i16"),
    DType("int8", np.dtype(np.int8), "int", "i8"),
    DType("uint32", np.dtype(np.uint32), "uint", "u32"),
    DType("uint16", np.dtype(np.uint16), "uint", "u16"),
    DType("uint8", np.dtype(np.uint8), "uint", "u8"),
    DType("bool_", np.dtype(np.bool_), "bool", "bool"),
    _packed("float8_e4m3fn_x4", np.uint32),
    _packed("float8_e5m2_x4", np.uint32),
    _packed("float4_e2m1fn_x4", np.uint16),
]

BY_NAME: dict[str, DType] = {d.name: d for d in _TABLE}
BY_SHORT: dict[str, DType] = {d.short: d for d in _TABLE}
# Reverse map from NumPy storage dtype; tfloat32 shares float32 storage, float32 wins.
_BY_NP: dict[np.dtype, str] = {}
for _d in reversed(_TABLE):
    if _d.public is None:  # a packed type's storage is the plain unsigned integer's; its public dtype names it
        _BY_NP[_d.np_dtype] = _d.name
    else:
        _BY_NP[_d.public] = _d.name
_BY_NP[np.dtype(ml_dtypes.float8_e4m3)] = "float8_e4m3"  # IEEE-style e4m3 maps to the same NKI name
_BY_NP[np.dtype(np.float64)] = "float32"  # NumPy's default float; kernels compute it as float32
_BY_NP[np.dtype(np.int64)] = "int32"


def normalize(dtype, what: str = "dtype") -> str:
    """Map any dtype-like object to its NKI name, or raise a clear error."""
    if isinstance(dtype, str) and dtype in BY_NAME:
        return dtype
    if isinstance(dtype, str) and dtype in BY_SHORT:
        return BY_SHORT[dtype].name
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        raise NkiApiError(f"{what} {dtype!r} is not a dtype; use one of {', '.join(BY_NAME)}") from None
    name = _BY_NP.get(np_dtype)
    if name is None:
        raise NkiApiError(f"{what} {np_dtype} is not supported; use one of {', '.join(BY_NAME)}")
    return name


def get(name: str) -> DType:
    return BY_NAME[name]


# NKI promotion for pairs whose result is not simply "the wider of the two" (reference/nki.md §2.2).
_SPECIAL = {
    frozenset({"float16", "bfloat16"}): "float32",
    frozenset({"float8_e4m3", "float8_e5m2"}): "bfloat16",
    frozenset({"int8", "uint8"}): "int16",
    frozenset({"int32", "uint32"}): "float32",
}
_FLOAT_RANK = {"float8_e5m2": 0, "float8_e4m3": 0, "float8_e8m0fnu": 0, "float16": 1, "bfloat16": 1, "tfloat32": 2,
               "float32": 3}


def promote(a: str, b: str) -> str:
    """The dtype NKI gives a binary op on tiles of dtypes ``a`` and ``b``."""
    if a == b:
        return a
    special = _SPECIAL.get(frozenset({a, b}))
    if special:
        return special
    da, db = BY_NAME[a], BY_NAME[b]
    if da.is_float and db.is_float:
        return a if _FLOAT_RANK[a] >= _FLOAT_RANK[b] else b
    if da.is_float != db.is_float:  # (float, int) -> the float
        return a if da.is_float else b
    if da.kind == "bool":
        return b
    if db.kind == "bool":
        return a
    return a if da.itemsize >= db.itemsize else b


def promote_scalar(tile_dtype: str, scalar) -> str:
    """Promotion with a Python scalar: weak types bool->uint8, int->int32, float->float32 (nki.md §2.2)."""
    if isinstance(scalar, bool):
        return promote(tile_dtype, "uint8")
    if isinstance(scalar, int | np.integer):
        return promote(tile_dtype, "int32") if not BY_NAME[tile_dtype].is_float else tile_dtype
    return promote(tile_dtype, "float32")


def compute_dtype(name: str) -> np.dtype:
    """The NumPy type on-chip values are held in: engines compute in fp32 (nki.md §2.3), so every float tile is
    held as float32 values already rounded to its dtype; integer and bool tiles keep their own type."""
    d = BY_NAME[name]
    return np.dtype(np.float32) if d.is_float else d.np_dtype


def held_value(name: str, value) -> float | int | bool:
    """A constant as a tile of dtype ``name`` holds it (what ``nl.full`` writes, and the immediate its lowering to
    ``memset`` carries): floats through an fp32 immediate rounded to the dtype (beyond its range: +-inf);
    integers from the exact value, rounded to nearest even and saturated (an fp32 detour would round those above
    2^24); NaN becomes integer 0, as saturating conversions do."""
    d = BY_NAME[name]
    with np.errstate(over="ignore", invalid="ignore"):
        if d.is_float:
            return float(np.float32(value).astype(d.np_dtype).astype(np.float32))
        if d.kind == "bool":
            return bool(value)
        info = np.iinfo(d.np_dtype)
        return int(np.clip(np.nan_to_num(np.rint(np.float64(value)), nan=0.0), info.min, info.max))


class FloatLimits:
    """``nl.fp32.min`` and friends: the finite extremes of a float dtype, as Python floats."""

    def __init__(self, name: str):
        info = ml_dtypes.finfo(BY_NAME[name].np_dtype)
        self.dtype = name
        self.min = float(info.min)
        self.max = float(info.max)
        self.tiny = float(info.tiny)
        self.eps = float(info.eps)
