"""MX (microscaling) formats of NC-v4, as the backends compute them (reference/nki.md §2.7 nc_matmul_mx,
quantize_mx, "dtypes"; [MX], [T3]):

* packed data: a ``float8_e4m3fn_x4`` / ``float8_e5m2_x4`` element is 32 bits holding 4 fp8 values, a
  ``float4_e2m1fn_x4`` element 16 bits holding 4 fp4 values; the 4 values are consecutive along the contraction
  (partition p, packed value j is contraction index ``4p + j``). Value j sits in byte j (nibble j for fp4), the
  lowest first: the order of 4 consecutive narrow values in little-endian memory, which is how a NumPy array of
  4 fp8 values viewed as one uint32 packs them *[d]*;
* scales: ``float8_e8m0fnu`` (value ``2^(e - 127)``, ``0xFF`` NaN) or its raw ``uint8``; one per 8 partitions x 4
  packed values (32 values) and free index; a 32-partition quadrant keeps its 4 scale rows at its start
  (``[P, F]`` tiles for P > 32, ``[P // 8, F]`` for P <= 32);
* ``quantize_mx``: per group ``X = 2^(floor(log2 max|v|) - (Emax - 1))``, Emax 8 (e4m3fn) / 15 (e5m2); a zero
  group gets ``2^-127``; the values are ``v / X`` rounded to the fp8 format.

Functions take and return NumPy arrays; ``xp`` lets the JAX backend run the same code on ``jax.numpy``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from nki_dsl.ir.ops.isa import MX_GROUP_PARTITIONS, MX_LANES, MX_QUADRANT, mx_scale_rows

# dtype name -> (bits per packed value, NumPy type of one value)
FORMATS = {
    "float8_e4m3fn_x4": (8, ml_dtypes.float8_e4m3fn),
    "float8_e5m2_x4": (8, ml_dtypes.float8_e5m2),
    "float4_e2m1fn_x4": (4, ml_dtypes.float4_e2m1fn),
}
EMAX = {"float8_e4m3fn_x4": 8, "float8_e5m2_x4": 15}  # quantize_mx's Emax (fp4 output is not supported, §2.7)
E8M0_BIAS = 127
E8M0_NAN = 0xFF


def value_table(fmt: str) -> np.ndarray:
    """fp32 value of every bit pattern of one packed value of ``fmt``."""
    bits, np_type = FORMATS[fmt]
    codes = np.arange(1 << bits, dtype=np.uint8)
    return codes.view(np_type).astype(np.float32)


_TABLES = {fmt: value_table(fmt) for fmt in FORMATS}


def unpack(raw, fmt: str, xp=np):
    """``raw [P, F]`` packed elements (unsigned ints) -> ``[4P, F]`` fp32 values, contraction index ``4p + j``."""
    bits, _ = FORMATS[fmt]
    raw = xp.asarray(raw).astype(xp.uint32)
    mask = (1 << bits) - 1
    lanes = [xp.asarray(_TABLES[fmt])[(raw >> (bits * j)) & mask] for j in range(MX_LANES)]
    values = xp.stack(lanes, axis=1)  # [P, 4, F]
    return values.reshape((raw.shape[0] * MX_LANES, raw.shape[1]))


def scale_values(scale, is_raw: bool, xp=np):
    """A scale tile as fp32 factors: raw ``uint8`` exponents decoded; an e8m0 tile already holds its values."""
    s = xp.asarray(scale)
    if not is_raw:
        return s.astype(xp.float32)
    e = s.astype(xp.int32)
    # 2^(e - 127) is exact in fp32 for every e (2^-127 as a subnormal)
    factor = xp.exp2((xp.where(e == E8M0_NAN, E8M0_BIAS, e) - E8M0_BIAS).astype(xp.float32))
    return xp.where(e == E8M0_NAN, xp.float32(np.nan), factor).astype(xp.float32)


def scale_row(partitions: int) -> np.ndarray:
    """The scale row each data partition reads (§2.7: 4 rows at the start of each 32-partition quadrant)."""
    p = np.arange(partitions)
    if partitions <= MX_QUADRANT:
        return p // MX_GROUP_PARTITIONS
    return (p // MX_QUADRANT) * MX_QUADRANT + (p % MX_QUADRANT) // MX_GROUP_PARTITIONS


def scaled_operand(raw, fmt: str, scale, raw_scale: bool, xp=np):
    """``[4P, F]`` fp32 values of a packed operand times its scales."""
    values = unpack(raw, fmt, xp)
    factors = scale_values(scale, raw_scale, xp)[scale_row(raw.shape[0])]  # [P, F]
    return values * xp.repeat(factors, MX_LANES, axis=0)


def quantize(src, fmt: str, raw_scale: bool, scale_out, xp=np):
    """``quantize_mx``: ``src [P, F]`` fp32 values -> (packed ``[P, F // 4]``, the scale tile ``scale_out`` with
    the group scales written into its used rows)."""
    if fmt not in EMAX:
        raise ValueError(f"quantize_mx writes fp8 x4 data, not {fmt}")
    src = xp.asarray(src, dtype=xp.float32)
    p, f = src.shape
    groups = src.reshape((p // MX_GROUP_PARTITIONS, MX_GROUP_PARTITIONS, f // MX_LANES, MX_LANES))
    amax = xp.max(xp.abs(groups), axis=(1, 3))  # [P // 8, F // 4]
    _, exp = xp.frexp(amax)  # amax = m * 2^exp, m in [0.5, 1): floor(log2 amax) = exp - 1
    x = xp.where(amax > 0, exp - 1 - (EMAX[fmt] - 1), -E8M0_BIAS)
    x = xp.clip(x, -E8M0_BIAS, E8M0_BIAS).astype(xp.int32)
    step = xp.repeat(xp.repeat(x, MX_GROUP_PARTITIONS, axis=0), MX_LANES, axis=1)  # [P, F]
    scaled = xp.ldexp(src, -step)  # exact: a power-of-two division
    codes = _encode(scaled, fmt, xp).reshape((p, f // MX_LANES, MX_LANES)).astype(xp.uint32)
    packed = sum(codes[:, :, j] << (8 * j) for j in range(MX_LANES)).astype(xp.uint32)
    rows = _group_rows(p)
    values = (x + E8M0_BIAS).astype(xp.uint8) if raw_scale else xp.ldexp(xp.ones_like(x, dtype=xp.float32), x)
    if xp is np:
        out = np.array(scale_out, copy=True)
        out[rows] = values
    else:
        out = xp.asarray(scale_out).at[rows].set(values.astype(xp.asarray(scale_out).dtype))
    return packed, out


def _encode(values, fmt: str, xp):
    """fp32 values -> the uint8 codes of ``fmt`` (round to nearest even, as a cast to the format does)."""
    _, np_type = FORMATS[fmt]
    if xp is np:
        return np.asarray(values, dtype=np.float32).astype(np_type).view(np.uint8)
    import jax  # the JAX backend's path: jnp casts to the ml_dtypes format and bitcasts

    return jax.lax.bitcast_convert_type(values.astype(np_type), xp.uint8)


def _group_rows(partitions: int) -> np.ndarray:
    """Scale row of each group of 8 partitions."""
    g = np.arange(partitions // MX_GROUP_PARTITIONS)
    if partitions <= MX_QUADRANT:
        return g
    per_quadrant = MX_QUADRANT // MX_GROUP_PARTITIONS
    return (g // per_quadrant) * MX_QUADRANT + g % per_quadrant


__all__ = ["FORMATS", "value_table", "unpack", "scale_values", "scale_row", "scaled_operand", "quantize",
           "mx_scale_rows"]  # fmt: skip
