"""Scalar-, Vector- and GpSimd-engine instructions of the current API in destination-passing form (reference/nki.md
§2.7 "ScalarE", "VectorE", "GpSimd"). Each computes through the legacy instruction of the same name with the
result dtype of ``dst`` (engines compute in fp32 and round once on the write), then writes ``dst``. The
accumulator registers that ``reduce_cmd`` drives are modelled in ``accumulators.py``."""

from __future__ import annotations

from nki_dsl.current.isa import accumulators
from nki_dsl.current.isa.destination import dst_access, dst_dtype, engine_arg, write
from nki_dsl.current.isa.enums import engine, member, reduce_cmd
from nki_dsl.errors import NkiApiError
from nki_dsl.ir import functions
from nki_dsl.ir.affine import Affine
from nki_dsl.isa import activations as legacy_act
from nki_dsl.isa import indexing as legacy_index
from nki_dsl.isa import mx as legacy_mx
from nki_dsl.isa import random as legacy_random
from nki_dsl.isa import reductions as legacy_red
from nki_dsl.isa import vector_alu as legacy_alu
from nki_dsl.language.creation import ndarray
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.index import IndexValue, as_index
from nki_dsl.trace.tensor import is_tile

# ------------------------------------------------------------------------------------------------ Scalar engine


def _command(api: str, value, allowed: tuple[str, ...], why: str = "") -> str:
    cmd = member(api, "reduce_cmd", value, reduce_cmd)
    if cmd not in allowed:
        raise NkiApiError(f"reduce_cmd={cmd} is not one of {', '.join(allowed)} for this instruction{why}",
                          caller_loc(), api)  # fmt: skip
    return cmd


NO_INIT = ": load_reduce starts from reduce_init, which it does not take"


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
               name=None):  # fmt: skip
    """``dst = op(data * scale + bias)``, and the free-axis sum of the activated values into the Scalar engine's
    accumulator registers as ``reduce_cmd`` says (``accumulators.py``): ``reset`` zeroes them, ``idle`` leaves
    them, ``reduce`` adds to them, ``reset_reduce`` starts them from this sum. ``reduce_res`` (``[P, 1]``) then
    reads them out; without it the sum stays in the registers for a later instruction."""
    api = "nisa.activation"
    cmd = _command(api, reduce_cmd, ("idle", "reset", "reduce", "reset_reduce"), NO_INIT)
    _activation(api, dst, op, data, bias, scale, reduce_op, reduce_res, cmd)


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    """``activation`` with ``reset_reduce`` and ``reduce_res`` (§2.7): the registers and ``reduce_res`` get this
    instruction's free-axis reduction."""
    api = "nisa.activation_reduce"
    if reduce_res is None:
        raise NkiApiError("activation_reduce writes its reduction into reduce_res=, which is missing", caller_loc(),
                          api)  # fmt: skip
    _activation(api, dst, op, data, bias, scale, reduce_op, reduce_res, "reset_reduce")


def _activation(api: str, dst, op, data, bias, scale, reduce_op, reduce_res, cmd: str) -> None:
    bias = _scalar_bias(api, bias, data)
    registers = accumulators.use(api, "scalar", data, cmd, reads_out=reduce_res is not None)
    if cmd == "idle":
        tile = legacy_act.activation(op, data, bias=bias, scale=scale, dtype=dst_dtype(api, dst))
    else:
        tile = legacy_act.activation(op, data, bias=bias, scale=scale, reduce_op="add" if reduce_op is None else
                                     reduce_op, reduce_res=registers, reduce_cmd=cmd,
                                     dtype=dst_dtype(api, dst))  # fmt: skip
    write(api, dst, tile)
    if reduce_res is not None:
        accumulators.read_out(api, "scalar", registers, reduce_res)


def _scalar_bias(api: str, bias, data):
    """A number as ``bias`` (allowed from NC-v3, §2.7 activation) becomes a ``[P, 1]`` column: the legacy
    instruction takes bias as a tile."""
    if bias is None or is_tile(bias):
        return bias
    if not isinstance(bias, int | float) or isinstance(bias, bool):
        raise NkiApiError(f"bias= must be a number or a [P, 1] tile, got {type(bias).__name__}", caller_loc(), api)
    if not is_tile(data):
        return bias  # the legacy instruction reports the bad data operand
    return legacy_alu.memset((data.shape[0], 1), float(bias), "float32")


# ------------------------------------------------------------------------------------------------ Vector engine


def tensor_tensor(dst, data1, data2, op, engine=engine.unknown, name=None):
    """``dst = op(data1, data2)`` elementwise."""
    api = "nisa.tensor_tensor"
    tile = legacy_alu.tensor_tensor(data1, data2, op, dtype=dst_dtype(api, dst), engine=engine_arg(api, engine))
    write(api, dst, tile)


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  engine=engine.unknown, name=None):  # fmt: skip
    """``dst = (data op0 operand0) op1 operand1`` with scalar or ``[P, 1]`` operands."""
    api = "nisa.tensor_scalar"
    tile = legacy_alu.tensor_scalar(data, op0, operand0, reverse0, op1, operand1, reverse1,
                                    dtype=dst_dtype(api, dst), engine=engine_arg(api, engine))  # fmt: skip
    write(api, dst, tile)


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, name=None):
    """``dst = (data op0 operand0) op1 operand1``: ``operand0`` scalar or ``[P, 1]``, ``operand1`` a tile."""
    api = "nisa.scalar_tensor_tensor"
    tile = legacy_alu.scalar_tensor_tensor(data=data, op0=op0, operand0=operand0, op1=op1, operand1=operand1,
                                           reverse0=reverse0, reverse1=reverse1, dtype=dst_dtype(api, dst))  # fmt: skip
    write(api, dst, tile)


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, name=None):
    """``r[0] = op1(op0(data0[0], initial), data1[0])``, ``r[i] = op1(op0(data0[i], r[i-1]), data1[i])`` per
    partition along the free axes; ``initial`` an fp32 scalar or ``[P, 1]``."""
    api = "nisa.tensor_tensor_scan"
    tile = legacy_alu.tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0, reverse1,
                                         dtype=dst_dtype(api, dst))  # fmt: skip
    write(api, dst, tile)


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None):
    """``dst = op``-reduction of ``data`` along the free ``axis`` (trailing axes; never 0)."""
    api = "nisa.tensor_reduce"
    tile = legacy_red.tensor_reduce(op, data, axis, negate=negate, keepdims=keepdims, dtype=dst_dtype(api, dst))
    write(api, dst, tile)


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=reduce_cmd.reset_reduce, reduce_init=None, reduce_res_negate=False,
                         name=None):  # fmt: skip
    """``dst = data op0 operand0``, and its ``reduce_op``-reduction over all free axes into the Vector engine's
    accumulator registers as ``reduce_cmd`` says (``accumulators.py``): ``reset_reduce`` starts from the
    reduction's identity, ``reduce`` continues, ``load_reduce`` starts from ``reduce_init``, ``reset`` sets the
    identity, ``idle`` leaves them undefined. ``reduce_res`` (``[P, 1]``) then reads them out, negated with
    ``reduce_res_negate`` (the registers keep the sign)."""
    api = "nisa.tensor_scalar_reduce"
    cmd = member(api, "reduce_cmd", reduce_cmd, globals()["reduce_cmd"])
    try:
        op = functions.function_name(reduce_op, ("add", "maximum", "minimum", "multiply"), "reduce_op")
    except NkiApiError as e:
        raise NkiApiError(e.bare_message, caller_loc(), api) from None
    if (cmd == "load_reduce") != (reduce_init is not None):
        raise NkiApiError("reduce_init= is given with reduce_cmd=load_reduce, which starts from it, and only then",
                          caller_loc(), api)  # fmt: skip
    registers = accumulators.use(api, "vector", data, cmd, reads_out=reduce_res is not None)
    dtype = dst_dtype(api, dst)
    if cmd in ("idle", "reset"):
        write(api, dst, legacy_alu.tensor_scalar(data, op0, operand0, reverse0, dtype=dtype))
        if cmd == "reset":
            accumulators.load(api, registers, accumulators.IDENTITY[op])
    elif cmd == "reset_reduce":
        write(api, dst, legacy_alu.tensor_scalar_reduce(data=data, op0=op0, operand0=operand0, reduce_op=op,
                                                        reduce_res=registers, reverse0=reverse0,
                                                        dtype=dtype))  # fmt: skip
    else:
        row = ndarray((registers.shape[0], 1), "float32")
        write(api, dst, legacy_alu.tensor_scalar_reduce(data=data, op0=op0, operand0=operand0, reduce_op=op,
                                                        reduce_res=row, reverse0=reverse0, dtype=dtype))  # fmt: skip
        if cmd == "load_reduce":
            accumulators.load(api, registers, reduce_init)
        accumulators.combine(api, registers, row, op)
    if reduce_res is not None:
        accumulators.read_out(api, "vector", registers, reduce_res, negate=reduce_res_negate)


def reciprocal(dst, data, name=None):
    """``dst = 1 / data`` (Vector engine, exact fp32 division)."""
    api = "nisa.reciprocal"
    write(api, dst, legacy_alu.reciprocal(data, dtype=dst_dtype(api, dst)))


def bn_stats(dst, data, name=None):
    """Per-partition (count, mean, count*var) of the even and of the odd elements of ``data`` (F <= 512)."""
    api = "nisa.bn_stats"
    write(api, dst, legacy_red.bn_stats(data, dtype=dst_dtype(api, dst)))


def bn_aggr(dst, data, name=None):
    """Mean and population variance per partition from concatenated ``bn_stats`` outputs."""
    api = "nisa.bn_aggr"
    write(api, dst, legacy_red.bn_aggr(data, dtype=dst_dtype(api, dst)))


def _count(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# ------------------------------------------------------------------------------------------------ GpSimd engine


def _pattern_value(api: str, shape, pattern, offset, channel_multiplier) -> IndexValue:
    """``offset + p * channel_multiplier + sum(idx_k * step_k)`` over a tile of ``shape``, for ``pattern``
    ``[[step, num], ...]`` (outermost first) naming the free axes of ``dst`` one to one."""
    try:
        pairs = [(int(step), int(num)) for step, num in pattern]
    except (TypeError, ValueError):
        raise NkiApiError(f"pattern={pattern!r} must be a list of [step, num] pairs", caller_loc(), api) from None
    free = tuple(shape[1:])
    if len(pairs) != len(free) and not (len(free) == 1 and _count(n for _, n in pairs) == free[0] and len(pairs) == 1):
        raise NkiApiError(f"pattern {pattern} must have one [step, num] per free axis of 'dst' {list(shape)} (an "
                          f"access pattern spanning several axes of one dst axis is not affine in it)",
                          caller_loc(), api)  # fmt: skip
    if tuple(n for _, n in pairs) != free:
        raise NkiApiError(f"pattern sizes {[n for _, n in pairs]} do not match the free axes of 'dst' {list(shape)}",
                          caller_loc(), api)  # fmt: skip
    expr = Affine.var("d0", int(channel_multiplier))
    for k, (step, _) in enumerate(pairs):
        expr = expr + Affine.var(f"d{k + 1}", step)
    base = as_index(offset)
    if base is NotImplemented or base.shape:
        raise NkiApiError(f"offset={offset!r} must be an int or a scalar loop index", caller_loc(), api)
    return IndexValue(expr + base.expr, tuple(shape))


def iota(dst, pattern, offset=0, channel_multiplier=0, name=None):
    """``dst[p, i...] = offset + p * channel_multiplier + sum(i_k * step_k)`` (int32 math, cast to dst)."""
    api = "nisa.iota"
    shape = tuple(dst_access(api, dst).shape)
    value = _pattern_value(api, shape, pattern, offset, channel_multiplier)
    write(api, dst, legacy_index.iota(value, dst_dtype(api, dst)))


_COMPARISONS = ("equal", "greater_equal", "greater", "less", "less_equal")


def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op="equal", offset=0,
                  name=None):  # fmt: skip
    """``dst = on_true_tile`` where ``cmp_op(a, 0)`` for the affine value ``a`` of ``iota``, else
    ``on_false_value`` (e.g. a causal mask: ``pattern=[[-1, N]], channel_multiplier=1, cmp_op=greater_equal``)."""
    api = "nisa.affine_select"
    shape = tuple(dst_access(api, dst).shape)
    value = _pattern_value(api, shape, pattern, offset, channel_multiplier)
    try:
        cmp = functions.function_name(cmp_op, _COMPARISONS, "cmp_op")
    except NkiApiError as e:
        raise NkiApiError(e.bare_message, caller_loc(), api) from None
    pred = {"equal": value == 0, "greater_equal": value >= 0, "greater": value > 0, "less": value < 0,
            "less_equal": value <= 0}[cmp]  # fmt: skip
    write(api, dst, legacy_index.affine_select(pred, on_true_tile, on_false_value, dtype=dst_dtype(api, dst)))


def quantize_mx(dst, src, dst_scale, name=None):
    """``dst`` (``float8_e4m3fn_x4`` / ``float8_e5m2_x4``, ``[P, F // 4]``) = ``src [P, F]`` (bf16/fp16) divided by
    a power-of-two scale per 8 partitions x 4 values, the scales written into ``dst_scale`` (e8m0 or uint8) in
    the layout ``nc_matmul_mx`` reads (reference/nki.md §2.7 quantize_mx; NC-v4)."""
    api = "nisa.quantize_mx"
    write(api, dst, legacy_mx.quantize_mx(src, dst_scale, dtype=dst_dtype(api, dst)))


# ------------------------------------------------------------------------------------------------ Random numbers


def rng(dst, engine=engine.vector, name=None):
    """``dst`` (an integer tile) = random 32-bit words truncated to its dtype's low bits (§2.7 "Random")."""
    api = "nisa.rng"
    shape = tuple(dst_access(api, dst).shape)
    write(api, dst, legacy_random.rng(shape, dst_dtype(api, dst), engine=engine_arg(api, engine)))


def rand2(dst, min, max, name=None):  # noqa: A002 - the instruction's parameter names
    """``dst`` = uniform draws in [min, max] (fp32 numbers or ``[P, 1]`` tiles), cast to ``dst``'s dtype (NC-v4)."""
    api = "nisa.rand2"
    shape = tuple(dst_access(api, dst).shape)
    write(api, dst, legacy_random.rand2(shape, min, max, dtype=dst_dtype(api, dst)))


def set_rng_seed(src_seeds, name=None):
    """Seed the generator from the 32-bit value of a ``[1, 1]`` tile."""
    legacy_random.set_rng_seed(src_seeds)
