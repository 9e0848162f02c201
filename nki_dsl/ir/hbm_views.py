"""HBM views: tensors whose storage is another HBM tensor's (no bytes move when one is made).

* ``%r = hbm.reshape(x=%a) {shape = ...}``: ``%a``'s elements in row-major order, in another shape.
* ``%v = hbm.view(x=%a) : i32[128, 64] hbm``: ``%a``'s bytes read as another dtype, ``t.view(dtype)`` of an HBM
  tensor (reference/nki.md §2.7 "Access patterns & views": ``.view(dtype)`` = ``reinterpret_cast``, the last
  dimension scaled by the size ratio, f32 ``(128, 64)`` -> u8 ``(128, 256)``, divisible when widening). The result
  type says the dtype and the shape; the view covers its source exactly, from its first byte (a view of part of
  a tensor is an access into the whole tensor's view, ``trace/views.py``), in the same kind of HBM.

Both are ``Family.RESHAPE``: not instructions, nothing to lower but the alias. Reads and writes through a view
touch its root's bytes: each backend holds one array per root (the NumPy reference a NumPy view of it, JAX the
root's array reinterpreted on every access, the simulator the root's address key), and the analyses that
relate accesses of one storage follow ``view_source`` to the root (dependence and races compare dtype views in the
root's bytes: ``in_bytes``). The rule ``hbm-view`` checks parsed IR keeps this form.
"""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access, Kernel, Op, Tensor
from nki_dsl.ir.types import TensorType

RESHAPE, VIEW = "hbm.reshape", "hbm.view"
VIEW_OPS = frozenset({RESHAPE, VIEW})


def viewed_shape(shape: tuple[int, ...], src: str, dst: str) -> tuple[int, ...] | None:
    """The shape of a ``src`` tensor of ``shape`` viewed as ``dst`` (§2.7), or None when its last dimension's
    bytes are not a whole number of ``dst`` elements (or it has none)."""
    if not shape:
        return None
    a, b = dtypes.get(src).itemsize, dtypes.get(dst).itemsize
    if (shape[-1] * a) % b:
        return None
    return tuple(shape[:-1]) + (shape[-1] * a // b,)


def view_source(op: Op) -> Tensor | None:
    """The tensor whose storage ``op``'s result views, or None when ``op`` makes no view."""
    if op.name not in VIEW_OPS or op.result is None:
        return None
    x = op.operands.get("x")
    return x.tensor if isinstance(x, Access) else None


def dtype_roots(kernel: Kernel) -> dict[Tensor, Tensor]:
    """Each tensor of a family of ``hbm.view`` views (the viewed tensor and every view of it, through views of
    views) -> the viewed tensor. Tensors without dtype views are absent (a reshape keeps its own index space)."""
    root: dict[Tensor, Tensor] = {}
    for stmt, _ in kernel.walk():
        src = view_source(stmt) if isinstance(stmt, Op) and stmt.name == VIEW else None
        if src is not None:
            root[stmt.result] = root[src] = root.get(src, src)
    return root


def byte_tensor(root: Tensor) -> Tensor:
    """A tensor standing for ``root``'s bytes: its shape with the last dimension counted in bytes, dtype uint8."""
    item = dtypes.get(root.type.dtype).itemsize
    shape = tuple(root.type.shape[:-1]) + (root.type.shape[-1] * item,) if root.type.shape else (item,)
    return Tensor(root.name, TensorType(shape, "uint8", root.type.buffer), root.kind)


def in_bytes(access: Access, space: Tensor) -> Access:
    """``access`` of a tensor of a dtype-view family as an access of the family's byte tensor ``space``: one more
    axis, the bytes of each element. Accesses through differently typed views of one storage are then comparable
    index for index (dependence, races)."""
    t = access.tensor.type
    item = dtypes.get(t.dtype).itemsize
    n = len(access.shape)
    index = tuple(access.index) if t.shape else (Affine(),)
    last = index[-1] * item + Affine.var(f"d{n}")
    return Access(space, index[:-1] + (last,), tuple(access.shape) + (item,))
