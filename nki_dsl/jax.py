"""``nki_dsl.jax``: kernels on JAX devices, and a kernel's SPMD grid spread over a device mesh.

One device: ``kernel(x, backend="jax")`` (JAX or NumPy arrays in, JAX arrays out; works inside ``jax.jit``, under
``jax.vmap`` and ``jax.grad``). Many devices::

    mesh = jax.make_mesh((8,), ("x",))
    run = nki_dsl.jax.on_mesh(kernel[8, 4], mesh, {0: "x"})   # grid axis 0 over mesh axis "x"
    out = run(a, b)                                           # a global jax.Array, sharded over the mesh

Device ``j`` of mesh axis ``x`` runs programs ``j * 8/n ... (j + 1) * 8/n - 1`` of grid axis 0 (``program_id(0)`` is
the device index times the local count plus the local index). Tensors a grid axis indexes in blocks are sharded
along that dimension, the rest replicated (``MeshKernel.layout``). Multi-host: start every process with
``jax.distributed.initialize(...)`` and build the mesh over ``jax.devices()`` (all hosts' devices); each process
calls ``run`` with the same arguments, as with any JAX SPMD program.
"""

from __future__ import annotations

import importlib

from nki_dsl import backends
from nki_dsl.errors import NkiApiError
from nki_dsl.targets import DEFAULT_TARGET, Target, get_target
from nki_dsl.trace.jit import as_launch


class MeshKernel:
    """A kernel launch (``kernel[grid]``) whose grid axes run on mesh axes; call it like the kernel."""

    def __init__(self, launch, mesh, axes: dict[int, str], target):
        self.launch = launch
        self.mesh = mesh
        self.axes = dict(axes)
        self.target = target  # the Target the kernel is traced and verified for
        self._compiled: dict[tuple, object] = {}

    def executable(self, *args, **kwargs):
        """The mesh executable of this specialisation (its ``layout`` / ``sharding(name)`` say where arrays live)."""
        kernel, arrays, key = self.launch.jit.specialize(self.launch.grid, args, kwargs, self.target)
        exe = self._compiled.get(key)
        if exe is None:
            mesh_module = importlib.import_module("nki_dsl.backends.jax.mesh")  # imports jax: only when used
            exe = self._compiled[key] = mesh_module.MeshExecutable(kernel, self.mesh, self.axes)
        return exe, arrays

    def __call__(self, *args, **kwargs):
        exe, arrays = self.executable(*args, **kwargs)
        return exe.run(arrays)


def on_mesh(kernel, mesh, axes: dict[int, str] | None = None, target: str | Target = DEFAULT_TARGET) -> MeshKernel:
    """``kernel[grid]`` spread over ``mesh``: ``axes`` maps grid axes to mesh axis names (default: grid axis 0 to
    the mesh's first axis); the kernel is traced and verified for ``target``, as ``kernel(..., target=)`` is."""
    backends.load("jax")  # a clear error when jax is not installed
    launch = as_launch(kernel)
    if not launch.grid:
        raise NkiApiError("on_mesh spreads a launch grid over devices: give the kernel one, e.g. kernel[8](...)")
    if axes is None:
        axes = {0: mesh.axis_names[0]}
    return MeshKernel(launch, mesh, axes, get_target(target))
