"""Trace-time tensor handles: what kernel code holds and indexes, and ``build_op``, which every ``nl``/``nisa``
function calls to emit its op and get the result back as a handle.

``NkiTensor`` stands for a whole IR tensor (a parameter, an allocation or an op's result tile); ``TileView`` for
an access into one (``t[ix, iy]``). Both act as operands, support Python arithmetic (routed to the ``nl`` op each
operator stands for) and in-place writes (``t[...] = x``, ``t[...] += x``).
"""

from __future__ import annotations

import contextvars

import numpy as np

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError, NkiTraceError
from nki_dsl.ir.affine import Affine, Mask
from nki_dsl.ir.nodes import Access, Tensor
from nki_dsl.ir.types import TensorType
from nki_dsl.trace import indirect, runtime_offset, semantics, views
from nki_dsl.trace import reshape as reshapes
from nki_dsl.trace.access import compose, index_access
from nki_dsl.trace.access_pattern import _pairs, access_pattern
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.handle import TileHandle
from nki_dsl.trace.symbolic import Dim, InconclusiveDimensionError
from nki_dsl.trace.vector_offset import indirect_pattern

# A front end whose integer indexing differs from legacy's installs a function ``(tile, key) -> key`` here (the
# current API keeps an on-chip tile at least 2-D: nki_dsl/current/indexing.py). Legacy kernels install none.
index_key_hook: contextvars.ContextVar = contextvars.ContextVar("nki_index_key_hook", default=None)


def build_op(
    name: str,
    operands: dict[str, object],
    attrs: dict[str, object] | None = None,
    *,
    dtype=None,
    mask=None,
    result_type: TensorType | None = None,
    hint: str = "",
) -> NkiTensor | None:
    """Emit op ``name`` (``semantics.emit_op``) and return its result as a handle (None for ops that only write
    their operands)."""
    op = semantics.emit_op(name, operands, attrs, dtype=dtype, mask=mask, result_type=result_type, hint=hint)
    return NkiTensor(op.result, op.mask) if op.result is not None else None


def _binary(fn: str, x, y):
    return build_op(f"nl.{fn}", {"x": x, "y": y})


def _unary(fn: str, x):
    return build_op(f"nl.{fn}", {"x": x})


def _assign(target: Access, value, accumulate: str = "none") -> None:
    """``t[...] = value`` (``accumulate="add"``: ``+=``), under the mask of the op that computed ``value``."""
    build_op("assign", {"dst": target, "src": value}, {"accumulate": accumulate}, mask=_computed_mask(value, target))


class UnmodelledMethodError(NkiApiError, AttributeError):
    """A tensor method NKI 0.6 names that nki_dsl does not model: refused at the kernel line with the reason, and
    still an AttributeError, so ``hasattr(t, name)`` stays False (the coverage table lists these as absent)."""


# reference/nki.md names these views (§1.3 "New generation indexing", §2.7 "Views") without their signatures
_NO_SIGNATURE = "reference/nki.md names it (§1.3 / §2.7 \"Views\") without a signature"
UNMODELLED_METHODS = {
    "slice": _NO_SIGNATURE + "; slice with t[a:b] or t[nl.ds(start, size)]",
    "broadcast": _NO_SIGNATURE + "; use t.broadcast_to(shape) or nl.broadcast_to(t, shape=...)",
    "rearrange": _NO_SIGNATURE + "; use t.permute(...) and t.reshape(shape)",
    "expand_dim": _NO_SIGNATURE + "; use nl.expand_dims(t, axis) or t.reshape(shape)",
    "squeeze_dim": _NO_SIGNATURE + "; index the size-1 axis with an int or use t.reshape(shape)",
    "reshape_dim": _NO_SIGNATURE + "; use t.reshape(shape)",
    "flatten_dims": _NO_SIGNATURE + "; use t.reshape(shape)",
    "vector_select": "HBM-only vector_select (§2.7 \"Views\") is not modelled; t.ap(pattern, vector_offset=idx) "
                     "gathers the rows an index tile names",
}  # fmt: skip


class _TileLike(TileHandle):
    """Operators and shared accessors for whole tensors and views."""

    __slots__ = ()
    __array_priority__ = 1000  # numpy scalars on the left defer to our operators

    def __getattr__(self, name: str):
        # only reached when normal lookup fails: a 0.6 view method nki_dsl does not model says so at the kernel line
        if name in UNMODELLED_METHODS:
            raise UnmodelledMethodError(f"not modelled by nki_dsl: {UNMODELLED_METHODS[name]}",
                                        caller_loc(), f"t.{name}")  # fmt: skip
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def access(self) -> Access:
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, ...]:
        shape = self.access().shape
        if any(isinstance(s, str) for s in shape):  # a shape family's HBM tensor: symbols become Dims
            table = current("shape").symbols
            return tuple(table.dim(s) if isinstance(s, str) else s for s in shape)
        return tuple(shape)

    @property
    def dtype(self) -> np.dtype:
        return dtypes.get(self.access().tensor.type.dtype).user_dtype

    @property
    def buffer(self) -> str:
        return self.access().tensor.type.buffer.value

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, key) -> TileView:
        hook = index_key_hook.get()
        if hook is not None:
            key = hook(self, key)
        if indirect.has_tile(key):  # data[idx_tile, i_f]: the HBM side of an indirect DMA (trace/indirect.py)
            return IndirectView(*indirect.indirect_access(self.access(), key, caller_loc()))
        return TileView(index_access(self.access(), key, caller_loc()))

    def __setitem__(self, key, value) -> None:
        hook = index_key_hook.get()
        if hook is not None:
            key = hook(self, key)
        if indirect.has_tile(key):
            raise NkiTraceError("rows picked by an index tile are written with nl.store(data[idx, ...], value=...) "
                                "(a scatter DMA), not by assignment", caller_loc())  # fmt: skip
        target = index_access(self.access(), key, caller_loc())
        accumulated = isinstance(value, TileView) and value._accumulated_into is not None
        if accumulated and _same_access(value._accumulated_into, target):
            return  # ``t[k] += x`` already accumulated in TileView.__iadd__
        _assign(target, value)

    def broadcast_to(self, shape):
        return build_op("nl.broadcast_to", {"x": self}, {"shape": tuple(int(s) for s in shape)})

    def permute(self, *dims):
        """A view with its axes reordered (reference/nki.md §2.7 "Views"): axis i of the view is axis ``dims[i]``
        of this one (``t.permute(0, 2, 1)`` or ``t.permute((0, 2, 1))``). On-chip the partition axis stays first."""
        order = tuple(int(d) for d in (dims[0] if len(dims) == 1 and isinstance(dims[0], tuple | list) else dims))
        base = self.access()
        rank = len(base.shape)
        if sorted(order) != list(range(rank)):
            raise NkiApiError(f"permute{order} is not a permutation of the {rank} axes of {list(base.shape)}",
                              caller_loc(), "permute")  # fmt: skip
        if base.tensor.type.buffer.on_chip and order[0] != 0:
            raise NkiApiError(f"permute{order} moves the partition axis of an on-chip tensor; it stays axis 0",
                              caller_loc(), "permute")  # fmt: skip
        inverse = {k: i for i, k in enumerate(order)}
        exprs = [Affine.var(f"d{inverse[k]}") for k in range(rank)]
        return TileView(compose(base, exprs, tuple(base.shape[k] for k in order)))

    def select(self, dim, index):
        """The view at ``index`` (an int) of axis ``dim`` (reference/nki.md §2.7 "Views"): ``t[..., index, ...]``.
        A runtime index (a register or [1, 1] integer tile) gives a view whose position is read when the
        instruction runs, as ``.ap(scalar_offset=)`` (trace/runtime_offset.py)."""
        rank = len(self.shape)
        if not isinstance(dim, int) or not -rank <= dim < rank:
            raise NkiApiError(f"select: dim {dim!r} is not an axis of {list(self.shape)}", caller_loc(), "select")
        runtime = is_tile(index)
        if not runtime and not isinstance(index, int | np.integer):
            raise NkiApiError(f"select index must be an int or a register, got {type(index).__name__}",
                              caller_loc(), "select")  # fmt: skip
        if self.access().tensor.type.buffer.on_chip and dim % rank == 0:
            raise NkiApiError("select cannot take the partition axis (axis 0) of an on-chip tensor", caller_loc(),
                              "select")  # fmt: skip
        key = [slice(None)] * rank
        key[dim] = 0 if runtime else int(index)
        if not runtime:
            return self[tuple(key)]
        runtime_offset.check_register(index, "select's index", "select")
        at0 = self[tuple(key)].access()
        key[dim] = 1
        at1 = self[tuple(key)].access() if self.shape[dim] > 1 else None
        k, coef = runtime_offset.select_parts(at0, at1, dim % rank)
        return OffsetView(at0, index, k, coef)

    def view(self, dtype):
        """``t.view(dtype)``: this on-chip tensor's bits as ``dtype``, a new tile made now; of an HBM tensor, an
        alias of its bytes (trace/views.py)."""
        viewed = views.view(self, dtype, build_op)
        return TileView(viewed) if isinstance(viewed, Access) else viewed

    def ap(self, pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim=0, dtype=None):
        """An access pattern ``[[step, num], ...]`` over this tensor's storage (trace/access_pattern.py); with
        ``scalar_offset``, one whose start a register moves at run time (trace/runtime_offset.py); with a
        ``vector_offset`` tile, the rows it picks: a gather or scatter DMA's side (trace/vector_offset.py)."""
        if scalar_offset is not None and vector_offset is None:
            return OffsetView.of(self, pattern, offset, scalar_offset, indirect_dim, dtype)
        if vector_offset is not None and scalar_offset is None and dtype is None:
            return IndirectView(*indirect_pattern(self.access(), _rows, pattern, offset, vector_offset, indirect_dim,
                                                  _pairs))  # fmt: skip
        if dtype is not None and vector_offset is None and scalar_offset is None:  # over the bits as dtype
            base = self.access()
            viewed, offset = views.pattern_base(base, NkiTensor(base.tensor), dtype, offset, build_op)
            return TileView(access_pattern(viewed.access(), _flat, pattern, offset, None, None, indirect_dim))
        return TileView(access_pattern(self.access(), _flat, pattern, offset, scalar_offset, vector_offset,
                                       indirect_dim, dtype))  # fmt: skip

    # Python operators: the nl op each stands for.
    def __add__(self, o):
        return _binary("add", self, o)

    def __radd__(self, o):
        return _binary("add", o, self)

    def __sub__(self, o):
        return _binary("subtract", self, o)

    def __rsub__(self, o):
        return _binary("subtract", o, self)

    def __mul__(self, o):
        return _binary("multiply", self, o)

    def __rmul__(self, o):
        return _binary("multiply", o, self)

    def __truediv__(self, o):
        return _binary("divide", self, o)

    def __rtruediv__(self, o):
        return _binary("divide", o, self)

    def __pow__(self, o):
        return _binary("power", self, o)

    def __rpow__(self, o):
        return _binary("power", o, self)

    def __mod__(self, o):
        return _binary("mod", self, o)

    def __rmod__(self, o):
        return _binary("mod", o, self)

    def __neg__(self):
        return _unary("negative", self)

    def __abs__(self):
        return _unary("abs", self)

    def __invert__(self):
        return _unary("invert", self)

    def __and__(self, o):
        return _binary("bitwise_and", self, o)

    def __rand__(self, o):
        return _binary("bitwise_and", o, self)

    def __or__(self, o):
        return _binary("bitwise_or", self, o)

    def __ror__(self, o):
        return _binary("bitwise_or", o, self)

    def __xor__(self, o):
        return _binary("bitwise_xor", self, o)

    def __rxor__(self, o):
        return _binary("bitwise_xor", o, self)

    def __lshift__(self, o):
        return _binary("left_shift", self, o)

    def __rlshift__(self, o):
        return _binary("left_shift", o, self)

    def __rshift__(self, o):
        return _binary("right_shift", self, o)

    def __rrshift__(self, o):
        return _binary("right_shift", o, self)

    def __lt__(self, o):
        return _binary("less", self, o)

    def __le__(self, o):
        return _binary("less_equal", self, o)

    def __gt__(self, o):
        return _binary("greater", self, o)

    def __ge__(self, o):
        return _binary("greater_equal", self, o)

    def __eq__(self, o):  # type: ignore[override]
        return _binary("equal", self, o)

    def __ne__(self, o):  # type: ignore[override]
        return _binary("not_equal", self, o)

    __hash__ = object.__hash__

    def __bool__(self):
        raise NkiTraceError(
            "a tile has no truth value at trace time: control flow cannot depend on tensor values "
            "(use nl.where or a mask)",
            caller_loc(),
        )

    def __iter__(self):
        raise NkiTraceError("a tile cannot be iterated in Python; index it or use an nl loop", caller_loc())

    def __len__(self):
        return self.shape[0]

    def __array__(self, *args, **kwargs):
        raise NkiTraceError(
            "a traced tile has no NumPy value inside the kernel; use nl ops on it (values exist only when the "
            "kernel runs)",
            caller_loc(),
        )


class NkiTensor(_TileLike):
    """A whole tensor. In-place ``t += x`` accumulates into it (the PSUM / SBUF accumulation idiom).

    ``mask`` is the mask of the op that computed this tile (over its axes): the op wrote nothing outside it, so
    ``t[...] = x`` / ``t[...] += x`` write only there too, as the instruction writing into ``t`` would in NKI."""

    __slots__ = ("tensor", "mask")

    def __init__(self, tensor: Tensor, mask: Mask | None = None):
        self.tensor = tensor
        self.mask = mask

    def access(self) -> Access:
        return self.tensor.full_access()

    @property
    def name(self) -> str:
        return self.tensor.name

    def __iadd__(self, other):
        _assign(self.access(), other, accumulate="add")
        return self

    def reshape(self, shape):
        """A view of this HBM tensor with another shape and the same elements in row-major order; of an on-chip
        tensor, a view of its storage with the partition axis kept (``trace/reshape.py``)."""
        if self.tensor.type.buffer.on_chip:
            return TileView(reshapes.on_chip(self.access(), shape))
        shape = tuple(_reshape_size(s) for s in (shape if isinstance(shape, tuple | list) else (shape,)))
        t = self.tensor.type
        if not t.buffer.on_chip:
            (n_old, old_syms), (n_new, new_syms) = _count(t.shape), _count(shape)
            if old_syms != new_syms:  # a shape family's view keeps each symbolic dimension, as a factor
                raise InconclusiveDimensionError(
                    f"reshape of '{self.name}' {_dims(t.shape)} to {_dims(shape)}: a shape family's reshape keeps "
                    f"every symbolic dimension as a dimension of its own (the element counts are then equal for every "
                    f"size); declare the dimension concrete",
                    caller_loc(),
                )
            if n_old != n_new:
                raise NkiApiError(
                    f"cannot reshape '{self.name}' {_dims(t.shape)} to {_dims(shape)}: {n_old} vs {n_new} elements"
                    + (" besides the symbolic dimensions" if old_syms else ""),
                    caller_loc(),
                    "reshape",
                )
        rtype = TensorType(shape, dtypes.normalize(t.dtype), t.buffer)
        return build_op("hbm.reshape", {"x": self}, {"shape": shape}, result_type=rtype, hint=f"{self.name}_r")

    def __repr__(self) -> str:
        return f"NkiTensor({self.tensor!r})"


def _reshape_size(s):
    """An int, or a shape family's dimension as its symbol (``Dim``: an HBM view keeps it)."""
    if isinstance(s, Dim) and s.concrete() is None:
        return s.table.size(s.expr, "the reshaped dimension")
    return int(s)


def _count(shape) -> tuple[int, list[str]]:
    """The product of the concrete sizes, and the symbolic ones sorted."""
    n = 1
    for s in shape:
        n *= 1 if isinstance(s, str) else s
    return n, sorted(s for s in shape if isinstance(s, str))


def _dims(shape) -> str:
    return "[" + ", ".join(str(s).lstrip("$") for s in shape) + "]"


class TileView(_TileLike):
    """An access into a tensor. ``view += x`` accumulates immediately and marks the view so that the
    ``__setitem__`` Python performs afterwards for ``t[k] += x`` does not write twice."""

    __slots__ = ("_access", "_accumulated_into")

    def __init__(self, access: Access, accumulated_into: Access | None = None):
        self._access = access
        self._accumulated_into = accumulated_into

    def access(self) -> Access:
        return self._access

    def __iadd__(self, other):
        _assign(self._access, other, accumulate="add")
        return TileView(self._access, accumulated_into=self._access)

    def reshape(self, shape):
        """The same elements in row-major order as another view of the storage (``trace/reshape.py``)."""
        if self._access.tensor.type.buffer.on_chip:
            return TileView(reshapes.on_chip(self._access, shape))
        return TileView(reshapes.hbm_view(self._access, shape, _flat))

    def __repr__(self) -> str:
        return f"TileView({self._access.describe()})"


class OffsetView(TileView):
    """``t.ap(pattern, scalar_offset=reg)``: the pattern's access at offset 0, the dimension and stride the
    register moves it by. Only instructions decorated with ``runtime_offset.takes_runtime_offsets`` take it (they
    ``resolve`` it inside the loop reading the register); any other use is refused."""

    __slots__ = ("register", "dim", "coef")
    runtime_offset = True

    def __init__(self, access: Access, register, dim: int, coef: int):
        super().__init__(access)
        self.register, self.dim, self.coef = register, dim, coef

    @classmethod
    def of(cls, t, pattern, offset, scalar_offset, indirect_dim, dtype) -> OffsetView:
        access = access_pattern(t.access(), _flat, pattern, offset, None, None, 0, dtype)
        dim, coef = runtime_offset.offset_parts(t.access(), access, scalar_offset, indirect_dim)
        return cls(access, scalar_offset, dim, coef)

    def parts(self) -> tuple[Access, int, int]:
        return self._access, self.dim, self.coef

    def resolve(self, var: str) -> TileView:
        """The view inside the ``scalar_offset`` loop ``var``: its index moves with the loop's index."""
        return TileView(runtime_offset.moved(self._access, self.dim, self.coef, var))

    def access(self) -> Access:
        raise NkiTraceError(f"a view of '{self._access.tensor.name}' at a scalar_offset read at run time can only "
                            f"be moved by nisa.dma_copy or nisa.tensor_copy", caller_loc())  # fmt: skip

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._access.shape)

    def __getitem__(self, key):
        raise NkiTraceError("a scalar_offset view cannot be indexed again", caller_loc())

    def reshape(self, shape):
        raise NkiTraceError("a scalar_offset view cannot be reshaped (its register moves the pattern it was made "
                            "with); reshape the tensor before .ap(...)", caller_loc())  # fmt: skip


class IndirectView(TileView):
    """``data[idx_tile, i_f]``: rows of an HBM tensor picked by the values of an on-chip integer tile. Only
    ``nl.load`` / ``nl.store`` / ``nisa.dma_copy`` take it (they read ``parts``); as any other operand it is
    refused, since its elements are known only when the DMA runs."""

    __slots__ = ("indices", "dim")

    def __init__(self, access: Access, indices: Access, dim: int):
        super().__init__(access)
        self.indices = indices
        self.dim = dim

    def parts(self) -> tuple[Access, Access, int]:
        """(HBM access with the placeholder row index, index tile, indexed dimension): ``ir/indirect.py``."""
        return self._access, self.indices, self.dim

    def access(self) -> Access:
        raise NkiTraceError(f"rows of '{self._access.tensor.name}' picked by an index tile can only be moved by "
                            f"nl.load, nl.store or nisa.dma_copy (an indirect DMA)", caller_loc())  # fmt: skip

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._access.shape)

    def __getitem__(self, key):
        raise NkiTraceError("an indirect view (data[idx_tile, ...]) cannot be indexed again", caller_loc())

    def reshape(self, shape):
        raise NkiTraceError("an indirect view (rows picked by an index tile) cannot be reshaped; reshape the "
                            "tensor before indexing it", caller_loc())  # fmt: skip

    def __repr__(self) -> str:
        return f"IndirectView({self._access.describe()}, rows from {self.indices.describe()})"


def indirect_operands(view) -> tuple[Access, dict[str, object]] | None:
    """For an ``IndirectView``: its HBM access, and the ``indices`` operand and ``indirect_dim`` attribute the DMA
    takes; None for any other value."""
    if not isinstance(view, IndirectView):
        return None
    access, indices, dim = view.parts()
    return access, {"indices": indices, "indirect_dim": dim}


def _computed_mask(value, target: Access) -> Mask | None:
    """The mask a write of ``value`` into ``target`` inherits from the op that computed ``value``."""
    if isinstance(value, NkiTensor) and value.mask is not None and len(value.shape) == len(target.shape):
        return value.mask
    return None


def _same_access(a: Access, b: Access) -> bool:
    return a.tensor is b.tensor and a.index == b.index and a.shape == b.shape


def _flat(tensor):
    """A 1-D view of a whole HBM tensor (for ``.ap`` patterns over its storage)."""
    total = 1
    for n in tensor.type.shape:
        total *= n
    return NkiTensor(tensor).reshape((total,)).tensor


def _rows(tensor, rows: int, row: int):
    """A ``[rows, row]`` view of a whole HBM tensor (for ``.ap`` with a vector offset)."""
    return NkiTensor(tensor).reshape((rows, row)).tensor


def is_tile(x) -> bool:
    return isinstance(x, _TileLike)
