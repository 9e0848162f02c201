"""Helpers the generated NumPy code calls. The numerics rules of the reference live here.

* On-chip float tiles are held as float32 arrays whose values are already rounded to the tile's dtype: engines
  compute in fp32 (reference/nki.md §2.3), and rounding happens when a result is written (round to nearest
  even, via ml_dtypes for bfloat16 and float8). Integer and bool tiles keep their own NumPy type.
* Float -> integer conversion rounds to nearest even and saturates, like the NKI simulator (nki.md §2.6); NaN
  converts to 0.
* PSUM accumulation is fp32: accumulating into an fp32 tile never rounds to a narrower type.
* Memory nobody wrote reads as NaN (floats) or the most negative integer (ints): fresh on-chip and HBM
  tensors are filled with these, never with zeros, so a kernel that reads unwritten memory shows it.
"""

from __future__ import annotations

import numpy as np

from nki_dsl import dtypes

F32 = np.float32


def _rounder(name: str):
    d = dtypes.get(name)
    if d.is_float:
        if d.np_dtype == np.dtype(np.float32):
            return lambda x: np.asarray(x, dtype=F32)
        storage = d.np_dtype
        if d.np_dtype.itemsize == 2 and d.np_dtype != np.dtype(np.float16):  # bfloat16: an fp32 with 16 bits cut
            return _round_bf16
        return lambda x: np.asarray(x, dtype=F32).astype(storage).astype(F32)
    if d.kind == "bool":
        return lambda x: np.asarray(x) != 0
    info = np.iinfo(d.np_dtype)

    def to_int(x):
        x = np.asarray(x)
        if x.dtype.kind not in "iub":  # a float, ml_dtypes' bfloat16 / float8 included (their kind is "V")
            # Clip in float64: int32's max is not a float32 (it rounds up to 2**31, which would wrap around).
            # NaN converts to 0, as saturating conversions do (a bare cast gives int32 min but int8 0).
            x = np.nan_to_num(np.rint(x.astype(np.float64)), nan=0.0)
            x = np.clip(x, info.min, info.max)
        return x.astype(d.np_dtype)

    return to_int


def _round_bf16(x):
    """fp32 -> bfloat16 (nearest even) -> fp32, NaN payloads kept: ml_dtypes' cast makes every NaN its canonical
    quiet NaN (0x7fc0), so a bfloat16 NaN copied by a same-dtype DMA would change its bits. A NaN whose payload
    lies in the top 7 mantissa bits (every bfloat16 NaN held as fp32 does) keeps them; one with only low payload bits
    has no bfloat16 spelling and becomes the canonical NaN."""
    x = np.asarray(x, dtype=F32)
    out = x.astype(dtypes.get("bfloat16").np_dtype).astype(F32)
    nan = np.isnan(x)
    if nan.any():
        top = x.view(np.uint32) & np.uint32(0xFFFF0000)
        keep = nan & ((top & np.uint32(0x007F0000)) != 0)
        out = np.where(keep, top.view(F32), out)
    return out


ROUND = {name: _rounder(name) for name in dtypes.BY_NAME}


def poison(dtype_name: str):
    """The value unwritten memory of this dtype reads as."""
    d = dtypes.get(dtype_name)
    if d.is_float:
        return np.nan
    if d.kind == "bool":
        return True
    return np.iinfo(d.np_dtype).min


def alloc_on_chip(shape, dtype_name: str, fill=None) -> np.ndarray:
    value = poison(dtype_name) if fill is None else fill
    return np.full(shape, value, dtype=dtypes.compute_dtype(dtype_name))


def alloc_hbm(shape, dtype_name: str) -> np.ndarray:
    d = dtypes.get(dtype_name)
    return np.full(shape, poison(dtype_name), dtype=d.np_dtype)


def to_hbm(value, dtype_name: str):
    """Convert on-chip values for storing into an HBM tensor of ``dtype_name`` (rounding once, from fp32)."""
    if dtype_name == "bfloat16":  # built from the bits: assigning fp32 into a bfloat16 array would drop NaN payloads
        rounded = _round_bf16(value)
        return (rounded.view(np.uint32) >> 16).astype(np.uint16).view(dtypes.get("bfloat16").np_dtype)
    return ROUND[dtype_name](value) if not dtypes.get(dtype_name).is_float else np.asarray(value, dtype=F32)


class RandomState:
    """The generator ``nl.dropout`` draws from; reset at every kernel launch so runs are reproducible."""

    def __init__(self):
        self.seed(0)

    def seed(self, seed) -> None:
        self.generator = np.random.default_rng(int(np.asarray(seed).reshape(-1)[0]))

    def uniform(self, shape) -> np.ndarray:
        return self.generator.random(shape, dtype=F32)

    def bits(self, shape, dtype_name: str) -> np.ndarray:
        """``nisa.rng``: random 32-bit words truncated to the low bits of integer dtype ``dtype_name``."""
        words = self.generator.integers(0, 1 << 32, size=shape, dtype=np.uint64).astype(np.uint32)
        d = dtypes.get(dtype_name)
        unsigned = np.dtype(f"u{d.itemsize}")
        return words.astype(unsigned).view(d.np_dtype)  # an unsigned narrowing cast keeps the low bits


def bitcast(value, src: str, dst: str) -> np.ndarray:
    """Held tile values of dtype ``src`` with their bits read as dtype ``dst`` (ir/bitcast.py): to ``src``'s
    storage (exact), the bytes viewed as ``dst``'s storage along the last axis, held as ``dst`` tiles are."""
    raw = np.ascontiguousarray(np.asarray(value).astype(dtypes.get(src).np_dtype))
    return raw.view(dtypes.get(dst).np_dtype).astype(dtypes.compute_dtype(dst))

