"""A hypothesis strategy for small real ``@nki.jit`` kernels that always verify.

A kernel is a ``Plan``: an optional loop (affine or sequential, 1-4 iterations) whose body loads a [P, F] fp32 tile
from HBM and applies a list of drawn steps to it, then stores the result. ``generated`` is one jit kernel that
interprets the plan at trace time (the plan, as a tuple, is a keyword constant, so every plan traces its own IR).
The steps:

* ``unary``: an elementwise ``nl`` function;  ``binary``: an elementwise op with a freshly loaded tile of ``y``;
* ``reduce``: a free-axis reduction with ``keepdims`` subtracted back from the tile (a [P, 1] broadcast);
* ``matmul``: ``acc = nl.zeros(psum); for k in affine_range(kt): acc += nl.matmul(w_k, tile, transpose_x=True)``,
  then the PSUM tile copied back to SBUF;
* ``transpose``: ``nl.transpose`` (both sides <= 128, so the result fits one PSUM tile's partitions);
* ``inplace``: ``t[...] += tile`` into an SBUF tensor declared before the loop (the loop's SBUF accumulation),
  stored to a second output after the loop.

The strategy tracks the tile's shape through the steps, so only legal shapes are drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

import nki_dsl as nki
import nki_dsl.language as nl

F_MAX = 256  # free size of any tile; x / y hold MAX_TRIPS tiles of it per row
MAX_TRIPS = 4
MAX_KT = 3  # contraction tiles of a matmul step
UNARY = ("exp", "tanh", "abs", "negative", "square", "sigmoid")
BINARY = ("add", "subtract", "multiply", "maximum", "minimum")
REDUCE = ("sum", "max")


@dataclass(frozen=True)
class Plan:
    loop: str  # "none", "affine" or "sequential"
    trips: int
    p: int  # the loaded tile's shape
    f: int
    steps: tuple  # ("unary", fn) | ("binary", fn) | ("reduce", fn) | ("matmul", kt) | ("transpose",) | ("inplace",)

    def astuple(self) -> tuple:
        return (self.loop, self.trips, self.p, self.f, self.steps)

    def shapes(self):
        """The tile's shape after the steps, and the in-place accumulator's shape (None without one)."""
        p, f, acc = self.p, self.f, None
        for s in self.steps:
            if s[0] == "transpose":
                p, f = f, p
            elif s[0] == "inplace":
                acc = (p, f)
        return (p, f), acc


@st.composite
def plans(draw) -> Plan:
    loop = draw(st.sampled_from(("none", "affine", "sequential")))
    trips = 1 if loop == "none" else draw(st.integers(1, MAX_TRIPS))
    p0 = p = draw(st.sampled_from((1, 32, 128)))
    f0 = f = draw(st.sampled_from((1, 8, 64, 128, 256)))
    steps, inplace = [], False
    for _ in range(draw(st.integers(0, 5))):
        kinds = ["unary", "binary", "reduce", "matmul"]
        if max(p, f) <= 128:
            kinds.append("transpose")
        if not inplace:
            kinds.append("inplace")
        kind = draw(st.sampled_from(kinds))
        if kind == "unary":
            steps.append((kind, draw(st.sampled_from(UNARY))))
        elif kind == "binary":
            steps.append((kind, draw(st.sampled_from(BINARY))))
        elif kind == "reduce":
            steps.append((kind, draw(st.sampled_from(REDUCE))))
        elif kind == "matmul":
            steps.append((kind, draw(st.integers(1, MAX_KT))))
        elif kind == "transpose":
            steps.append((kind,))
            p, f = f, p
        else:
            steps.append((kind,))
            inplace = True
    return Plan(loop, trips, p0, f0, tuple(steps))


def inputs(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, y: [128, MAX_TRIPS * F_MAX]; w: the stationary tiles, [MAX_KT * 128, 128]. Values in [-1, 1]."""
    rng = np.random.default_rng(seed)
    x, y = (rng.uniform(-1, 1, (128, MAX_TRIPS * F_MAX)).astype(np.float32) for _ in range(2))
    w = rng.uniform(-1, 1, (MAX_KT * 128, 128)).astype(np.float32)
    return x, y, w


def _range(plan: Plan):
    if plan.loop == "affine":
        return nl.affine_range(plan.trips)
    if plan.loop == "sequential":
        return nl.sequential_range(plan.trips)
    return [0]


@nki.jit
def generated(x, y, w, plan=None):
    plan = Plan(*plan)  # passed as a plain tuple: jit constants are numbers, strings and tuples
    (pf, ff), acc_shape = plan.shapes()
    out = nl.ndarray((pf, plan.trips * ff), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = None
    if acc_shape is not None:
        acc = nl.zeros(acc_shape, nl.float32, buffer=nl.sbuf)
    for i in _range(plan):
        p, f = plan.p, plan.f
        t = nl.load(x[0:p, i * f:(i + 1) * f])
        for s in plan.steps:
            if s[0] == "unary":
                t = getattr(nl, s[1])(t)
            elif s[0] == "binary":
                t = getattr(nl, s[1])(t, nl.load(y[0:p, i * f:(i + 1) * f]))
            elif s[0] == "reduce":
                t = nl.subtract(t, getattr(nl, s[1])(t, axis=1, keepdims=True))
            elif s[0] == "matmul":
                res = nl.zeros((p, f), nl.float32, buffer=nl.psum)
                for k in nl.affine_range(s[1]):
                    res += nl.matmul(nl.load(w[k * 128:k * 128 + p, 0:p]), t, transpose_x=True)
                t = nl.copy(res)
            elif s[0] == "transpose":
                t = nl.transpose(t)
                p, f = f, p
            else:
                acc += t
        nl.store(out[0:pf, i * ff:(i + 1) * ff], value=t)
    if acc is None:
        return out
    acc_out = nl.ndarray(acc_shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(acc_out, value=acc)
    return out, acc_out
