"""Current-API instructions the legacy instruction set has no single instruction for, built from several legacy
instructions that compute exactly the documented values (reference/nki.md §2.7). The numbers are the
instruction's; the engine program is not: the simulator prices the composition (e.g. ``exponential`` runs on the
Scalar engine here, on the Vector engine on trn3), so modelled timing of kernels using these is approximate.

* ``tensor_scalar_cumulative``: ``tensor_scalar`` then a ``tensor_tensor_scan`` carrying the register, then a
  copy of the last element into the Vector accumulator (``accumulators.py``);
* ``exponential``: ``activation(exp)`` with the max as a bias, its sum into the Vector accumulator;
* ``select_reduce``: the ``on_false`` fill, a ``tensor_copy_predicated``, an optional row reduction into (or
  combined with) the Vector accumulator;
* ``range_select``: ``iota`` of the free index, two comparisons, a predicated copy, an optional row max;
* ``dma_compute`` (static addresses): loads, fp32 adds, one write;
* ``nc_stream_shuffle``: one partition-to-partition DMA per moved partition (SBUF);
* ``max8`` / ``nc_find_index8``: per round a row max (or an equality with one value), a running count of the
  matches (``tensor_tensor_scan``) to single out the first (or the n-th) occurrence, a predicated copy or a
  masked sum of positions; duplicates are taken once per round, as the instructions do.

Where an instruction's legacy form writes its reduction elsewhere, ``reduce`` adds one Vector instruction that
combines it into the accumulator; ``reduce_res`` is a read-out instruction in every case (``accumulators.py``).

(``sendrecv`` and ``core_barrier``, between the cores of an LNC=2 launch, are in ``collectives.py``.)
"""

from __future__ import annotations

from nki_dsl.current.isa import accumulators
from nki_dsl.current.isa.accumulators import IDENTITY
from nki_dsl.current.isa.destination import dst_access, dst_dtype, write
from nki_dsl.current.isa.enums import member, reduce_cmd
from nki_dsl.errors import NkiApiError
from nki_dsl.ir import functions
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.types import Buffer
from nki_dsl.isa import activations as legacy_act
from nki_dsl.isa import dma as legacy_dma
from nki_dsl.isa import indexing as legacy_index
from nki_dsl.isa import reductions as legacy_red
from nki_dsl.isa import vector_alu as legacy_alu
from nki_dsl.language.creation import ndarray
from nki_dsl.language.memory import broadcast_to
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.index import IndexValue
from nki_dsl.trace.tensor import is_tile

FP32_MIN = -3.4028234663852886e38  # range_select's fill, the most negative fp32 (§2.7 range_select)


def _fn(api: str, arg: str, value, allowed) -> str:
    try:
        return functions.function_name(value, tuple(allowed), arg)
    except NkiApiError as e:
        raise NkiApiError(e.bare_message, caller_loc(), api) from None


def _free_axes(shape) -> tuple[int, ...]:
    return tuple(range(1, len(shape)))


def _column(shape, value, api: str):
    """A ``[P, 1]`` fp32 tile holding ``value`` (a number) or ``value`` itself (a ``[P, 1]`` tile)."""
    if is_tile(value):
        return value
    return legacy_alu.memset((shape[0], 1), float(value), "float32")


def tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None, reduce_cmd=reduce_cmd.reset_reduce, name=None):
    """Per partition, ``reg = op1(op0(src[i], imm0), reg); dst[i] = reg`` along the free axes, ``reg`` being the
    Vector engine's accumulator register of the lane (``accumulators.py``). It starts at ``op1``'s identity
    (``reset_reduce``), at ``imm1`` (``load_reduce``) or where an earlier instruction left it (``reduce``), and
    ends holding the last element, so a later call with ``reduce`` carries on."""
    api = "nisa.tensor_scalar_cumulative"
    shape = tuple(dst_access(api, dst).shape)
    acc = _fn(api, "op1", op1, IDENTITY)
    cmd = member(api, "reduce_cmd", reduce_cmd, globals()["reduce_cmd"])
    if cmd not in ("reset_reduce", "reduce", "load_reduce"):
        raise NkiApiError(f"reduce_cmd={cmd}: the instruction runs its register through every element, so it "
                          f"starts it (reset_reduce, load_reduce) or continues it (reduce)", caller_loc(),
                          api)  # fmt: skip
    if (cmd == "load_reduce") != (imm1 is not None):
        raise NkiApiError("imm1= is given with reduce_cmd=load_reduce, which starts the register from it, and only "
                          "then", caller_loc(), api)  # fmt: skip
    registers = accumulators.use(api, "vector", src, cmd, reads_out=False)
    initial = {"reset_reduce": IDENTITY[acc], "reduce": registers, "load_reduce": imm1}[cmd]
    if not is_tile(initial):
        initial = float(initial)
    t = legacy_alu.tensor_scalar(src, op0, imm0, dtype="float32")
    zeros = legacy_alu.memset(shape, 0.0, "float32")
    scan = legacy_alu.tensor_tensor_scan(t, zeros, initial, acc, "add", dtype="float32")
    write(api, dst, scan)
    last = scan[(slice(None),) + tuple(slice(n - 1, n) for n in shape[1:])]
    write(api, registers, legacy_alu.tensor_copy(last, dtype="float32"))


def exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=reduce_cmd.idle, reduce_init=0.0, name=None):
    """``dst = exp(src - max_value)`` (``max_value`` a number or ``[P, 1]``), and the row sums of ``dst`` into
    the Vector engine's accumulator registers as ``reduce_cmd`` says (``accumulators.py``; ``load_reduce`` starts
    from ``reduce_init``); ``reduce_res`` reads them out."""
    api = "nisa.exponential"
    shape = tuple(dst_access(api, dst).shape)
    cmd = member(api, "reduce_cmd", reduce_cmd, globals()["reduce_cmd"])
    if is_tile(max_value):
        bias = legacy_alu.tensor_scalar(max_value, "multiply", -1.0, dtype="float32")
    else:
        bias = _column(shape, -float(max_value), api)
    registers = accumulators.use(api, "vector", src, cmd, reads_out=reduce_res is not None)
    if cmd == "idle":
        write(api, dst, legacy_act.activation("exp", src, bias=bias, dtype=dst_dtype(api, dst)))
    else:
        if cmd == "load_reduce":
            accumulators.load(api, registers, reduce_init)
        tile = legacy_act.activation("exp", src, bias=bias, reduce_op="add", reduce_res=registers,
                                     reduce_cmd="reduce" if cmd == "load_reduce" else cmd,
                                     dtype=dst_dtype(api, dst))  # fmt: skip
        write(api, dst, tile)
    if reduce_res is not None:
        accumulators.read_out(api, "vector", registers, reduce_res)


def _reduce_into(api: str, registers, data, op: str, cmd: str) -> None:
    """The registers after an instruction whose legacy form has no reduction: ``data``'s ``op``-reduction over
    its free axes written (``reset_reduce``) or combined in (``reduce``), or ``op``'s identity (``reset``)."""
    if cmd == "reset":
        accumulators.load(api, registers, IDENTITY[op])
    elif cmd in ("reset_reduce", "reduce"):
        row = legacy_red.tensor_reduce(op, data, _free_axes(data.shape), keepdims=True, dtype="float32")
        if cmd == "reduce":
            accumulators.combine(api, registers, row, op)
        else:
            write(api, registers, row)


NO_INIT = ": load_reduce starts from reduce_init, which it does not take"


def _command(api: str, value) -> str:
    cmd = member(api, "reduce_cmd", value, reduce_cmd)
    if cmd == "load_reduce":
        raise NkiApiError(f"reduce_cmd=load_reduce is not one of idle, reset, reduce, reset_reduce for this "
                          f"instruction{NO_INIT}", caller_loc(), api)  # fmt: skip
    return cmd


def select_reduce(dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=reduce_cmd.idle,
                  reduce_op="maximum", reverse_pred=False, name=None):  # fmt: skip
    """``dst = on_true`` where ``predicate`` is nonzero (zero with ``reverse_pred``), else ``on_false`` (a number
    or ``[P, 1]``); the row reduction of ``dst`` into the Vector engine's accumulator registers as ``reduce_cmd``
    says (``accumulators.py``); ``reduce_res`` reads them out."""
    api = "nisa.select_reduce"
    shape = tuple(dst_access(api, dst).shape)
    cmd = _command(api, reduce_cmd)
    op = _fn(api, "reduce_op", reduce_op, ("maximum", "minimum", "add"))
    registers = accumulators.use(api, "vector", dst, cmd, reads_out=reduce_res is not None)
    if is_tile(on_false):
        write(api, dst, broadcast_to(on_false, shape=shape))
    else:
        write(api, dst, legacy_alu.memset(shape, float(on_false), dst_dtype(api, dst)))
    legacy_alu.tensor_copy_predicated(src=on_true, dst=dst, predicate=predicate, reverse_pred=reverse_pred)
    _reduce_into(api, registers, dst, op, cmd)
    if reduce_res is not None:
        accumulators.read_out(api, "vector", registers, reduce_res)


_COMPARE = ("equal", "less", "less_equal", "greater", "greater_equal")


def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd.reset_reduce,
                 reduce_res=None, reduce_op="maximum", range_start=0, on_false_value=FP32_MIN, name=None):  # fmt: skip
    """With ``j = range_start + free index``: ``dst = on_true_tile`` where ``comp_op0(j, bound0) and
    comp_op1(j, bound1)`` (bounds ``[P, 1]`` fp32), else ``on_false_value``; with ``reduce_res`` the row max."""
    api = "nisa.range_select"
    shape = tuple(dst_access(api, dst).shape)
    if len(shape) != 2:
        raise NkiApiError(f"'dst' {list(shape)}: range_select is modelled for [P, F] tiles", caller_loc(), api)
    if isinstance(range_start, IndexValue) or not isinstance(range_start, int):
        raise NkiApiError("range_start must be a Python int here", caller_loc(), api)
    cmd = _command(api, reduce_cmd)
    op = _fn(api, "reduce_op", reduce_op, ("maximum",))
    registers = accumulators.use(api, "vector", dst, cmd, reads_out=reduce_res is not None)
    j_int = legacy_index.iota(IndexValue(_free_index(range_start), shape), "int32")
    j = legacy_alu.tensor_copy(j_int, dtype="float32")
    c0, c1 = _fn(api, "comp_op0", comp_op0, _COMPARE), _fn(api, "comp_op1", comp_op1, _COMPARE)
    keep = legacy_alu.tensor_tensor(legacy_alu.tensor_scalar(j, c0, _column(shape, bound0, api), dtype="uint8"),
                                    legacy_alu.tensor_scalar(j, c1, _column(shape, bound1, api), dtype="uint8"),
                                    "multiply", dtype="uint8")  # fmt: skip
    write(api, dst, legacy_alu.memset(shape, float(on_false_value), dst_dtype(api, dst)))
    legacy_alu.tensor_copy_predicated(src=on_true_tile, dst=dst, predicate=keep)
    _reduce_into(api, registers, dst, op, cmd)
    if reduce_res is not None:
        accumulators.read_out(api, "vector", registers, reduce_res)


def _free_index(start: int):
    return Affine.var("d1") + start


def dma_compute(dst, srcs, reduce_op, scales=None, unique_indices=True, oob_mode=None, name=None):
    """``dst = sum(srcs)`` in fp32 (the DMA engines' add; every scale 1.0), static addresses only."""
    api = "nisa.dma_compute"
    target = dst_access(api, dst)
    if _fn(api, "reduce_op", reduce_op, ("add",)) != "add":
        raise NkiApiError("dma_compute adds (reduce_op=nl.add)", caller_loc(), api)
    srcs = list(srcs)
    if not 1 <= len(srcs) <= 16:
        raise NkiApiError(f"dma_compute takes 1 to 16 srcs, got {len(srcs)}", caller_loc(), api)
    if scales is not None and any(float(s) != 1.0 for s in scales):
        raise NkiApiError("dma_compute scales must all be 1.0", caller_loc(), api)
    acc = None
    for k, src in enumerate(srcs):
        if not is_tile(src) or tuple(src.shape) != tuple(target.shape):
            raise NkiApiError(f"srcs[{k}] must be a tensor of dst's shape {list(target.shape)}", caller_loc(), api)
        tile = src
        if not src.access().tensor.type.buffer.on_chip:
            tile = ndarray(tuple(src.shape), "float32")
            legacy_dma.dma_copy(dst=tile, src=src)
        acc = tile if acc is None else legacy_alu.tensor_tensor(acc, tile, "add", dtype="float32")
    if target.tensor.type.buffer.on_chip:
        write(api, dst, legacy_alu.tensor_copy(acc, dtype=dst_dtype(api, dst)))
    else:
        legacy_dma.dma_copy(dst=dst, src=acc)  # converts to dst's dtype on the way


def nc_stream_shuffle(dst, src, shuffle_mask, name=None):
    """In every 32-partition quadrant, ``dst[i] = src[shuffle_mask[i]]``; 255 leaves partition i of ``dst``."""
    api = "nisa.nc_stream_shuffle"
    target = dst_access(api, dst)
    mask = [int(m) for m in shuffle_mask]
    if len(mask) != 32 or any(not (0 <= m < 32 or m == 255) for m in mask):
        raise NkiApiError("shuffle_mask has 32 entries, each a partition 0..31 of the quadrant or 255",
                          caller_loc(), api)  # fmt: skip
    if Buffer.PSUM in (target.tensor.type.buffer, src.access().tensor.type.buffer):
        raise NkiApiError("nc_stream_shuffle on PSUM is not modelled (it is composed of SBUF DMAs)", caller_loc(), api)
    for i in range(target.shape[0]):
        m = mask[i % 32]
        if m != 255:
            p = i // 32 * 32 + m
            legacy_dma.dma_copy(dst=dst[i:i + 1], src=src[p:p + 1])


def _rows(api: str, tile, what: str) -> tuple[int, int]:
    shape = tuple(tile.shape) if is_tile(tile) else ()
    if len(shape) != 2:
        raise NkiApiError(f"'{what}' must be a [P, N] tile, got {list(shape) or type(tile).__name__}", caller_loc(),
                          api)  # fmt: skip
    return shape


def _nth_match(eq, ones, nth):
    """1 where ``eq`` holds for the ``nth`` time along the row (``nth`` a number or a ``[P, 1]`` column)."""
    count = legacy_alu.tensor_tensor_scan(ones, eq, 0.0, "multiply", "add", dtype="float32")
    return legacy_alu.tensor_tensor(legacy_alu.tensor_scalar(count, "equal", nth, dtype="float32"), eq, "multiply",
                                    dtype="float32")  # fmt: skip


def max8(dst, src, name=None):
    """``dst [P, 8]`` = the 8 largest values of each row of ``src [P, N]`` (8 <= N <= 16384), descending,
    compared in fp32; a value occurring k times fills k places."""
    api = "nisa.max8"
    p, n = _rows(api, src, "src")
    if tuple(dst_access(api, dst).shape) != (p, 8) or not 8 <= n <= 16384:
        raise NkiApiError(f"max8 takes src [P, N] with 8 <= N <= 16384 and dst [P, 8]; got {[p, n]} and "
                          f"{list(dst.shape)}", caller_loc(), api)  # fmt: skip
    x = legacy_alu.tensor_copy(src, dtype="float32")
    work = ndarray((p, n), "float32")
    write(api, work, x)
    ones = legacy_alu.memset((p, n), 1.0, "float32")
    gone = legacy_alu.memset((p, n), float("-inf"), "float32")
    for r in range(8):
        m = legacy_red.tensor_reduce("maximum", work, (1,), keepdims=True, dtype="float32")
        write(api, dst[:, r:r + 1], m)
        if r < 7:
            first = _nth_match(legacy_alu.tensor_scalar(work, "equal", m, dtype="float32"), ones, 1.0)
            legacy_alu.tensor_copy_predicated(src=gone, dst=work, predicate=first)


NOT_FOUND = 4294967295.0  # all ones; converting to uint32/uint16 saturates it to that type's all-ones


def nc_find_index8(dst, data, vals, name=None):
    """``dst [P, 8]`` (uint32 or uint16) = per row, the index of the first occurrence in ``data [P, N]`` of each
    of the 8 values ``vals [P, 8]``; a value repeated in ``vals`` takes the next occurrence each time; absent:
    all ones."""
    api = "nisa.nc_find_index8"
    p, n = _rows(api, data, "data")
    if tuple(dst_access(api, dst).shape) != (p, 8) or _rows(api, vals, "vals") != (p, 8):
        raise NkiApiError("nc_find_index8 takes data [P, N], vals [P, 8] and dst [P, 8]", caller_loc(), api)
    if dst_dtype(api, dst) not in ("uint32", "uint16"):
        raise NkiApiError(f"dst is uint32 or uint16, not {dst_dtype(api, dst)}", caller_loc(), api)
    ones = legacy_alu.memset((p, n), 1.0, "float32")
    pos = legacy_alu.tensor_copy(legacy_index.iota(IndexValue(_free_index(0), (p, n)), "int32"), dtype="float32")
    for k in range(8):
        v = vals[:, k:k + 1]
        nth = legacy_alu.memset((p, 1), 1.0, "float32")
        for j in range(k):  # earlier copies of the same value take the earlier occurrences
            same = legacy_alu.tensor_tensor(vals[:, j:j + 1], v, "equal", dtype="float32")
            nth = legacy_alu.tensor_tensor(nth, same, "add", dtype="float32")
        hit = _nth_match(legacy_alu.tensor_scalar(data, "equal", v, dtype="float32"), ones, nth)
        index = legacy_red.tensor_reduce("add", legacy_alu.tensor_tensor(hit, pos, "multiply", dtype="float32"),
                                         (1,), keepdims=True, dtype="float32")  # fmt: skip
        found = legacy_red.tensor_reduce("add", hit, (1,), keepdims=True, dtype="float32")
        missing = legacy_alu.tensor_scalar(found, "subtract", 1.0, reverse0=True, op1="multiply",
                                           operand1=NOT_FOUND, dtype="float32")  # fmt: skip
        write(api, dst[:, k:k + 1], legacy_alu.tensor_tensor(index, missing, "add", dtype=dst_dtype(api, dst)))


def shared_identity_matrix(n, dtype="uint8", dst=None):
    """An ``[n, n]`` SBUF identity (``nl.shared_identity_matrix``): ``iota`` of ``p - j`` compared with 0."""
    api = "nl.shared_identity_matrix"
    diff = legacy_index.iota(IndexValue(_p_minus_j(), (int(n), int(n))), "int32")
    eye = legacy_alu.tensor_scalar(diff, "equal", 0, dtype=dtype if dst is None else dst_dtype(api, dst))
    if dst is None:
        return eye
    write(api, dst, eye)
    return dst


def _p_minus_j():
    return Affine.var("d0") + Affine.var("d1", -1)
