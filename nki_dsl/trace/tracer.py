"""Run a kernel body once with proxy tensors and return the IR it recorded."""

from __future__ import annotations

import inspect

from nki_dsl.errors import NkiTraceError, SourceLoc
from nki_dsl.ir.nodes import Kernel, Tensor
from nki_dsl.ir.types import Buffer, TensorType
from nki_dsl.targets import Target
from nki_dsl.trace.builder import Builder
from nki_dsl.trace.specs import ArgGroup, ArgSpec, BoundArgs
from nki_dsl.trace.symbolic import SymbolDecl, SymbolTable
from nki_dsl.trace.tensor import NkiTensor


def trace_kernel(fn, args: BoundArgs, grid: tuple[int, ...], target: Target) -> tuple[Kernel, dict]:
    """The kernel's IR and the target facts its body read (``Builder.target_fact``): the IR holds for every target
    with those values."""
    source_file = inspect.getsourcefile(fn) or fn.__code__.co_filename
    builder = Builder(fn.__name__, source_file, grid, target)
    specs = [s for _, v in args.items for s in (v.items if isinstance(v, ArgGroup) else (v,))]
    if any(isinstance(s, ArgSpec) and s.is_symbolic for s in specs):
        builder.symbols = SymbolTable()  # a shape family: parameter dimensions may be symbols (trace/symbolic.py)

    def param(name: str, value: ArgSpec) -> NkiTensor:
        shape = tuple(builder.symbols.declare(s).expr.terms[0][0] if isinstance(s, SymbolDecl) else s
                      for s in value.shape) if builder.symbols else value.shape  # fmt: skip
        tensor = Tensor(name, TensorType(shape, value.dtype, Buffer.HBM), "param")
        builder.add_param(tensor)
        return NkiTensor(tensor)

    call_args = {}
    for name, value in args.items:
        if isinstance(value, ArgSpec):
            call_args[name] = param(name, value)
        elif isinstance(value, ArgGroup):  # a tuple of tensors: one HBM parameter per item
            names = ArgGroup.param_names(name, len(value.items))
            call_args[name] = tuple(param(n, s) for n, s in zip(names, value.items))
        else:
            builder.kernel.constants[name] = value.record
            call_args[name] = value.value
    with builder.active():
        returned = fn(**call_args)
    builder.check_open_loops()
    builder.kernel.outputs = _outputs(fn, returned)
    if builder.symbols is not None:
        builder.kernel.symbols = dict(builder.symbols.defs)
    return builder.kernel, builder.facts


def _outputs(fn, returned) -> list[Tensor]:
    if returned is None:
        return []
    items = returned if isinstance(returned, tuple | list) else (returned,)
    outs = []
    for item in items:
        if not isinstance(item, NkiTensor) or item.tensor.type.buffer.on_chip:
            where = SourceLoc(inspect.getsourcefile(fn) or "<unknown>", fn.__code__.co_firstlineno)
            raise NkiTraceError(
                f"kernel {fn.__name__} must return HBM tensors (nl.ndarray(..., buffer=nl.shared_hbm)); "
                f"got {item!r}",
                where,
            )
        outs.append(item.tensor)
    return outs
