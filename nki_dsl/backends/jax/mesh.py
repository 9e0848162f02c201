"""A kernel's SPMD grid spread over a ``jax.sharding.Mesh`` with ``shard_map``.

Each mapped grid axis ``g`` (grid size ``G``) goes to a mesh axis of ``n`` devices (``G % n == 0``): device ``j``
runs programs ``j * G/n ... (j + 1) * G/n - 1`` of that axis, so ``program_id(g)`` is the device's index times
``G/n`` plus its local program index. Tensors are sharded or replicated as ``sharding.layouts`` derives from the
IR's access patterns; shard_map hands each device its slices, and the sharded outputs it returns are the global
arrays. The same code runs on CPU host devices, GPUs or TPUs: nothing here depends on the platform.
"""

from __future__ import annotations

import jax
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from nki_dsl.backends.jax.analysis import analyse
from nki_dsl.backends.jax.program import GridSplit, run_kernel, to_held
from nki_dsl.backends.jax.sharding import check_writable, layouts
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.nodes import Kernel


class MeshExecutable:
    def __init__(self, kernel: Kernel, mesh, axes: dict[int, str]):
        self.kernel, self.mesh, self.axes = kernel, mesh, dict(axes)
        grid = kernel.grid or ()
        for g, name in self.axes.items():
            if not 0 <= g < len(grid):
                raise NkiApiError(f"kernel {kernel.name!r} has a grid of rank {len(grid)}: no grid axis {g} to spread")
            if name not in mesh.shape:
                raise NkiApiError(f"mesh has no axis {name!r}; its axes are {', '.join(mesh.axis_names)}")
            if grid[g] % mesh.shape[name]:
                raise NkiApiError(f"grid axis {g} has {grid[g]} programs, not a multiple of the {mesh.shape[name]} "
                                  f"devices of mesh axis {name!r}")  # fmt: skip
        if len(set(self.axes.values())) != len(self.axes):
            raise NkiApiError("each mesh axis can take one grid axis")
        self.info = info = analyse(kernel)
        self.local = {g: grid[g] // mesh.shape[name] for g, name in self.axes.items()}
        self.layout = layouts(info, tuple(self.axes))
        check_writable(info, self.layout, tuple(self.axes), self.axes)
        params = [p.name for p in kernel.params]
        outs = [info.root(t.name) for t in kernel.outputs]
        self.in_specs = tuple(self.spec(n) for n in params)
        self.out_specs = (tuple(self.spec(n) for n in outs), tuple(self.spec(n) for n in info.written_params))
        shard = jax.shard_map(self._device_body, mesh=mesh, in_specs=self.in_specs, out_specs=self.out_specs,
                              check_vma=False)  # fmt: skip
        self._jitted = jax.jit(shard)

    def spec(self, name: str) -> PartitionSpec:
        return PartitionSpec(*(None if d is None else self.axes[d[0]] for d in self.layout[name]))

    def sharding(self, name: str) -> NamedSharding:
        """Where argument or output ``name`` lives: pass arrays placed so to avoid a copy at the call."""
        return NamedSharding(self.mesh, self.spec(name))

    def _device_body(self, *arrays):
        index = {g: lax.axis_index(name) for g, name in self.axes.items()}
        splits = {g: GridSplit(index[g] * self.local[g], self.local[g]) for g in self.axes}
        offsets, shapes = {}, {}
        for name, dims in self.layout.items():
            if any(d is not None for d in dims):
                offsets[name] = tuple(None if d is None else index[d[0]] * self.local[d[0]] * d[1] for d in dims)
                shape = self.info.types[name].shape
                shapes[name] = tuple(n if d is None else self.local[d[0]] * d[1] for n, d in zip(shape, dims))
        return run_kernel(self.info, arrays, splits, offsets, shapes)

    def call(self, *arrays):
        # Each argument goes where its layout puts it (a no-op for arrays already placed so).
        held = [jax.device_put(to_held(a, p.type), self.sharding(p.name)) for a, p in zip(arrays, self.kernel.params)]
        outs, _ = self._jitted(*held)
        return outs

    def run(self, arrays: dict):
        outs = self.call(*(arrays[p.name] for p in self.kernel.params))
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs
