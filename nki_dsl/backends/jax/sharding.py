"""Which HBM tensor dimensions follow a grid axis: the layout of a kernel's arrays over a device mesh.

Dimension ``k`` of tensor ``T`` is sharded along grid axis ``g`` when every access of ``T`` indexes it as
``s * pid_g + rest`` with the same block ``s``, ``rest`` staying inside ``[0, s)`` for every value of the other
indices, and ``s * grid[g] == T.shape[k]``: program ``p`` then touches exactly block ``p`` of that dimension, so a
device running programs ``[j * local, (j + 1) * local)`` needs only the slice ``[j * local * s, (j + 1) * local * s)``.
Anything else is replicated: every device holds the whole tensor. A tensor the kernel writes must be sharded
along every grid axis spread over the mesh (devices cannot merge their writes into one replicated array).
"""

from __future__ import annotations

from nki_dsl.backends.jax.analysis import KernelInfo
from nki_dsl.errors import NkiError
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.nodes import Access, Op
from nki_dsl.ir.types import Buffer

# tensor name -> per dimension: (grid axis, block size s) or None (replicated)
Layout = dict[str, tuple[tuple[int, int] | None, ...]]


def _accesses(info: KernelInfo) -> dict[str, list[Access]]:
    found: dict[str, list[Access]] = {}
    for stmt, _ in info.kernel.walk():
        if isinstance(stmt, Op):
            for v in stmt.operands.values():
                if isinstance(v, Access):
                    found.setdefault(v.tensor.name, []).append(v)
    return found


def _block(e: Affine, pid: str, access: Access, ranges: dict) -> int | None:
    """``s`` when ``e`` is ``s * pid + rest`` with ``rest`` in ``[0, s)``, else None."""
    s = e.coef(pid)
    if s <= 0:
        return None
    rest = e - Affine.var(pid, s)
    env = dict(ranges)
    env.update({f"d{k}": (0, max(n - 1, 0)) for k, n in enumerate(access.shape)})
    try:
        lo, hi = rest.bounds(env)
    except KeyError:
        return None
    return s if lo >= 0 and hi < s else None


def layouts(info: KernelInfo, grid_axes: tuple[int, ...]) -> Layout:
    """The layout of every HBM tensor (parameters, outputs, HBM allocations) over the grid axes in ``grid_axes``."""
    grid = info.kernel.grid
    viewed = set(info.roots) | set(info.roots.values())  # reshape views share storage: keep those whole
    result: Layout = {}
    for name, found in _accesses(info).items():
        t = info.types[name]
        if t.buffer.on_chip:
            continue
        dims: list[tuple[int, int] | None] = [None] * len(t.shape)
        if name not in viewed:
            taken = set()
            for k, n in enumerate(t.shape):
                for g in grid_axes:
                    if g in taken:
                        continue
                    blocks = {_block(a.index[k], f"pid{g}", a, info.ranges) for a in found}
                    if len(blocks) == 1 and None not in blocks and blocks.pop() * grid[g] == n:
                        dims[k] = (g, n // grid[g])
                        taken.add(g)
                        break
        result[name] = tuple(dims)
    for p in info.kernel.params:
        result.setdefault(p.name, (None,) * len(p.type.shape))
    return result


def check_writable(info: KernelInfo, layout: Layout, grid_axes: tuple[int, ...], mesh_names: dict[int, str]) -> None:
    """Refuse, naming the tensor and the axis, what devices could not compute apart."""
    written = set(info.outputs) | set(info.written_params)
    for stmt, _ in info.kernel.walk():
        shared = isinstance(stmt, Op) and stmt.name == "alloc" and stmt.result.type.buffer == Buffer.SHARED_HBM
        if shared and stmt.result.name not in written and stmt.result.name in info.all_written:
            raise NkiError(f"shared HBM tensor {stmt.result.name} is scratch memory programs may share; a mesh run "
                           f"gives each device its own copy, so it cannot run over a mesh", stmt.loc)  # fmt: skip
    for name in sorted(written):
        dims = layout.get(name, ())
        for g in grid_axes:
            if not any(d is not None and d[0] == g for d in dims):
                raise NkiError(f"tensor {name} is written at positions that do not follow program_id({g}) in blocks "
                               f"(s * program_id({g}) + an offset below s, s * grid[{g}] spanning a dimension), so "
                               f"grid axis {g} cannot be spread over mesh axis {mesh_names[g]!r}")  # fmt: skip
