"""Instantiate a shape family: the concrete kernel for given symbol values, by substitution.

The result is an ordinary kernel (no symbols, every size an int, every mask constant-folded into plain affine
constraints over loop indices, program ids and axes), so the verifier, the passes and every backend run on it
unchanged. Tensors are copied with their concrete types; ops and loops keep their locations. The family itself
is left untouched (one family serves many calls).
"""

from __future__ import annotations

from nki_dsl.ir.affine import Affine, Mask
from nki_dsl.ir.nodes import Access, Kernel, Loop, Op, Stmt, Tensor
from nki_dsl.ir.symbols import evaluate, is_symbol
from nki_dsl.ir.types import TensorType


def instantiate(family: Kernel, base: dict[str, int]) -> Kernel:
    """The concrete kernel of ``family`` for base symbol values ``base`` (``{"$N": 256}``, inside their ranges;
    ``symbols.SymbolError`` otherwise)."""
    return substitute(family, evaluate(family.symbols, base))


def substitute(family: Kernel, values: dict[str, int]) -> Kernel:
    """``family`` with every symbol replaced by ``values[symbol]`` as given (base and derived alike, consistent
    or not: the family verifier's upper kernel puts each symbol at the top of its interval)."""
    return _Instance(values).kernel(family)


class _Instance:
    def __init__(self, values: dict[str, int]):
        self.values = values
        self.env: dict[str, Affine | int] = dict(values)
        self.tensors: dict[int, Tensor] = {}

    def size(self, s):
        return self.values[s] if is_symbol(s) else s

    def tensor(self, t: Tensor) -> Tensor:
        new = self.tensors.get(id(t))
        if new is None:
            ty = t.type
            shape = tuple(self.size(s) for s in ty.shape)
            new = Tensor(t.name, TensorType(shape, ty.dtype, ty.buffer, ty.par_axis), t.kind)
            self.tensors[id(t)] = new
        return new

    def affine(self, e: Affine) -> Affine:
        return e.substitute(self.env) if any(v in self.env for v in e.vars()) else e

    def mask(self, m: Mask | None) -> Mask | None:
        return None if m is None else Mask.of(*(self.affine(c) for c in m.constraints))

    def value(self, v):
        if isinstance(v, Access):
            return Access(self.tensor(v.tensor), tuple(self.affine(e) for e in v.index),
                          tuple(self.size(s) for s in v.shape))  # fmt: skip
        if isinstance(v, Affine):
            return self.affine(v)
        if isinstance(v, Mask):
            return self.mask(v)
        if isinstance(v, tuple) and any(is_symbol(x) for x in v):  # a reshape's shape: ($M, 6, 128)
            return tuple(self.size(x) for x in v)
        return v

    def body(self, stmts: list[Stmt]) -> list[Stmt]:
        out: list[Stmt] = []
        for s in stmts:
            if isinstance(s, Loop):
                reads = self.value(s.reads) if s.reads is not None else None
                out.append(Loop(s.kind, s.var, s.start, self.size(s.stop), s.step, self.body(s.body), s.loc, reads))
            else:
                operands = {k: self.value(v) for k, v in s.operands.items()}
                attrs = {k: self.value(v) for k, v in s.attrs.items()}
                result = None if s.result is None else self.tensor(s.result)
                out.append(Op(s.name, operands, attrs, result, s.loc, self.mask(s.mask), s.mask_shape))
        return out

    def kernel(self, k: Kernel) -> Kernel:
        params = [self.tensor(p) for p in k.params]
        body = self.body(k.body)
        outputs = [self.tensor(t) for t in k.outputs]
        return Kernel(k.name, params, body, outputs, k.grid, k.source_file, dict(k.constants), lnc=k.lnc)
