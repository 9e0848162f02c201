"""``nki.language`` of the current (0.6) API (reference/nki.md §2.6, §2.7 "nki.language").

The convenience wrappers (load/store/copy/matmul/transpose, math, reductions, comparisons, logical and bitwise
ops, activations, creation) are the legacy front end's (``nki_dsl.language``): they already return tiles, and 0.6
reintroduced them with the same meaning. What differs is here: loops with Python's semantics, ``ndarray`` with
``address=`` and no ``par_dim``, launch queries with default axes, a per-target ``tile_size``, ``NKIObject``,
the new dtypes and the buffer predicates. Legacy-only names (``arange``, ``mgrid``, ``par_dim``, ``nc``,
``spmd_dim``, ``loop_reduce``) are not exported: 0.6 removed them."""

from nki_dsl import language as _legacy
from nki_dsl.current import unmodelled as _unmodelled
from nki_dsl.current.dynamic import dynamic_range, fori_loop, while_loop
from nki_dsl.current.isa.composed import shared_identity_matrix
from nki_dsl.current.language.buffers import is_hbm, is_on_chip, is_psum, is_sbuf
from nki_dsl.current.language.creation import empty_like, full, ndarray, ones, zeros, zeros_like
from nki_dsl.current.language.debug import device_print
from nki_dsl.current.language.objects import NKIObject
from nki_dsl.current.language.ordering import no_reorder
from nki_dsl.current.language.spmd import num_programs, program_id, program_ndim
from nki_dsl.current.language.tile_size import tile_size
from nki_dsl.current.loops import affine_range, sequential_range, static_range
from nki_dsl.language.buffers import hbm, private_hbm, psum, sbuf, shared_hbm
from nki_dsl.language.composite import rms_norm, softmax
from nki_dsl.language.constants import shared_constant
from nki_dsl.language.math import dropout, matmul, random_seed, where
from nki_dsl.language.memory import broadcast_to, copy, expand_dims, load, load_transpose2d, store, transpose
from nki_dsl.trace.handle import TileHandle as NkiTensor  # every tensor and view of a kernel (§2.7 "Access patterns")
from nki_dsl.trace.index import ds

_MATH = [
    "abs", "add", "arctan", "ceil", "cos", "divide", "exp", "floor", "log", "maximum", "minimum", "multiply",
    "negative", "power", "reciprocal", "rsqrt", "sign", "sin", "sqrt", "square", "subtract", "tan", "tanh", "trunc",
    "relu", "sigmoid", "gelu", "gelu_dx", "gelu_apprx_tanh", "gelu_apprx_sigmoid", "silu", "silu_dx", "erf",
    "erf_dx", "softplus", "mish", "mod", "fmod",
    "all", "max", "mean", "min", "prod", "sum", "var",
    "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not",
    "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift",
]  # fmt: skip
globals().update({_n: getattr(_legacy, _n) for _n in _MATH if hasattr(_legacy, _n)})

from nki_dsl.current.language.dtypes import *  # noqa: E402, F403 - the dtype names, old and new
from nki_dsl.current.language.dtypes import DTYPE_NAMES as _DTYPE_NAMES  # noqa: E402

fp32, bf16, fp16, bfp16 = _legacy.fp32, _legacy.bf16, _legacy.fp16, _legacy.bfp16
bypass = "bypass"  # the identity activation / ALU operator constant of 0.6 (same as nl.copy as an activation)

__all__ = [
    "ndarray", "zeros", "ones", "full", "zeros_like", "empty_like", "shared_constant",
    "load", "store", "load_transpose2d", "copy", "transpose", "matmul", "broadcast_to", "expand_dims", "ds",
    "where", "dropout", "random_seed", "softmax", "rms_norm",
    "affine_range", "sequential_range", "static_range", "dynamic_range", "fori_loop", "while_loop",
    "sbuf", "psum", "hbm", "private_hbm", "shared_hbm", "is_sbuf", "is_psum", "is_hbm", "is_on_chip",
    "program_id", "num_programs", "program_ndim", "tile_size", "NKIObject", "NkiTensor", "shared_identity_matrix",
    "device_print", "no_reorder", "bypass",
    *[_n for _n in _MATH if hasattr(_legacy, _n)], *_DTYPE_NAMES,
]  # fmt: skip

# 0.6 names that are not modelled resolve to functions refusing with the reason (current/unmodelled.py).
__getattr__ = _unmodelled.module_getattr("nl", __name__, _unmodelled.LANGUAGE)
