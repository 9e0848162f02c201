"""``t.ap(pattern, offset, scalar_offset=reg, indirect_dim=k)``: an access pattern whose start moves by a value
read from a register when the instruction runs (reference/nki.md §2.7 "Access patterns": start = ``offset +
s * prod(base.shape[indirect_dim + 1:])``; it replaces the removed ``tensor_copy_dynamic_src/dst``).

The view is an ``OffsetView``: the pattern's access at ``s = 0`` with the dimension and stride the register moves.
Only the instructions that take a dynamic start (``nisa.dma_copy``, ``nisa.tensor_copy``, decorated with
``takes_runtime_offsets``) accept it; any other use is refused, as its elements are known only at run time. Each
such instruction is emitted inside a ``scalar_offset`` loop (``ir/runtime_loops.py``) reading the register, whose
index is ``s``: the access's index gains the term ``stride * i``, and everything static (bounds, dependences,
addresses) works over the loop's declared range of offsets. That range is the offsets that keep the access
inside its tensor (``offset_range``), so a register outside it raises ``NkiRuntimeError`` when the kernel runs,
as NKI's DGE bounds-checks dynamic addresses (§2.7 "Data movement", ``oob_mode.error``).

Choices where the reference is silent: on chip (a ``[P, F]`` tensor) ``indirect_dim=0`` moves whole partitions
and ``indirect_dim=1`` free elements; an HBM pattern moves its flat start by the stride of the base tensor's
dimension ``indirect_dim``. A scalar offset inside a runtime loop whose own index also moves the access is refused
(the loop's bound is known only once its body is traced).
"""

from __future__ import annotations

import functools
import math

from nki_dsl.errors import NkiApiError, NkiTraceError
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access
from nki_dsl.ir.runtime_loops import expression_range, register_problem
from nki_dsl.trace.builder import caller_loc, current

API = "ap(scalar_offset=)"


def check_register(register, what: str = "scalar_offset", api: str = API) -> None:
    from_tile = getattr(register, "access", None)
    problem = "it is not a tensor" if from_tile is None else register_problem(register.access())
    if problem is not None:
        problem = problem.replace("its register", "the tensor")
        raise NkiApiError(f"{what} must be a register (nisa.register_alloc) or a 1x1 integer SBUF tensor: "
                          f"{problem}", caller_loc(), api)  # fmt: skip


def select_parts(at0: Access, at1: Access | None, dim: int) -> tuple[int, int]:
    """``t.select(dim, reg)``: the tensor dimension and stride the register moves, from the views at index 0 and
    1 of axis ``dim`` (they differ in one index expression, by a constant)."""
    if at1 is None:
        raise NkiApiError(f"select with a register on axis {dim} of size 1: the only index is 0", caller_loc(),
                          "select")  # fmt: skip
    moved_dims = [(k, (b - a)) for k, (a, b) in enumerate(zip(at0.index, at1.index)) if a != b]
    if len(moved_dims) != 1 or not moved_dims[0][1].is_const:
        raise NkiApiError(f"select with a register on axis {dim} of this view is not modelled (the axis does not "
                          f"map to one dimension of '{at0.tensor.name}')", caller_loc(), "select")  # fmt: skip
    k, delta = moved_dims[0]
    return k, delta.const


def offset_parts(base: Access, pattern_access: Access, register, indirect_dim) -> tuple[int, int]:
    """``(dimension of pattern_access the register moves, elements per unit of the register)``."""
    check_register(register)
    shape = tuple(base.tensor.type.shape)
    if isinstance(indirect_dim, bool) or not isinstance(indirect_dim, int) or not 0 <= indirect_dim < len(shape):
        raise NkiApiError(f"indirect_dim={indirect_dim!r} must name a dimension of the {len(shape)}-D tensor "
                          f"'{base.tensor.name}'", caller_loc(), API)  # fmt: skip
    stride = math.prod(shape[indirect_dim + 1:])
    if not base.tensor.type.buffer.on_chip:
        return 0, stride  # the pattern indexes the flat storage
    return (0, 1) if indirect_dim == 0 else (1, stride)  # [P, F]: partitions, or free elements


def takes_runtime_offsets(api: str):
    """Decorate an instruction so that its ``OffsetView`` arguments run inside ``scalar_offset`` loops."""

    def wrap(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            named = list(enumerate(args)) + list(kwargs.items())
            views = [(k, v) for k, v in named if getattr(type(v), "runtime_offset", False)]  # tensor.OffsetView
            if not views:
                return fn(*args, **kwargs)
            builder = current(api)
            args, loops = list(args), []
            try:
                for k, view in views:
                    loop = _open(builder, view)
                    loops.append(loop)
                    resolved = view.resolve(loop.var)
                    if isinstance(k, int):
                        args[k] = resolved
                    else:
                        kwargs[k] = resolved
                return fn(*args, **kwargs)
            finally:
                for loop in reversed(loops):
                    builder.close_loop(loop)

        return call

    return wrap


def _open(builder, view):
    access, dim, coef = view.parts()
    lo, hi = offset_range(access, dim, coef, builder)
    loop = builder.open_loop("scalar_offset", lo, hi + 1, 1, caller_loc())
    loop.reads = view.register.access()
    return loop


def offset_range(access: Access, dim: int, coef: int, builder) -> tuple[int, int]:
    """The offsets ``s`` (inclusive range) for which ``access`` moved by ``coef * s`` in ``dim`` stays inside."""
    ranges = {f"pid{g}": (0, n - 1) for g, n in enumerate(builder.kernel.grid or (1,))}
    for lp in builder.loops:
        if lp.runtime:
            continue  # its bound is not known while its body is traced: an index over it has no range
        ranges[lp.var] = (lp.start, max(lp.start, lp.last))
    size = access.tensor.type.shape[dim]
    rest = expression_range(access.index[dim], "", access.shape, ranges)
    if rest is None or not isinstance(size, int):
        raise NkiTraceError(f"a scalar_offset view of '{access.tensor.name}' whose index also moves with a "
                            f"runtime loop's index is not modelled (that loop's bound is not known yet)",
                            caller_loc())  # fmt: skip
    lo_rest, hi_rest = rest
    lo, hi = -(lo_rest // coef), (size - 1 - hi_rest) // coef  # coef * s + rest within [0, size - 1]
    if lo > hi:
        raise NkiApiError(f"the access pattern leaves no room for an offset in '{access.tensor.name}' "
                          f"(dimension {dim} of size {size}): it does not fit even at scalar_offset 0",
                          caller_loc(), API)  # fmt: skip
    return lo, hi


def moved(access: Access, dim: int, coef: int, var: str) -> Access:
    """``access`` with ``coef * var`` added to its index ``dim``."""
    index = tuple(e + Affine.var(var, coef) if k == dim else e for k, e in enumerate(access.index))
    return Access(access.tensor, index, access.shape)
