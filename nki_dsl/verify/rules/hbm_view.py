"""Rule ``hbm-view``: an ``hbm.view`` (``t.view(dtype)`` of an HBM tensor, ir/hbm_views.py) is the form every
backend aliases: the whole source tensor (no partial access, no mask), a result in the same kind of HBM, neither
dtype ``bool`` (no defined bit layout), and the result shape reference/nki.md §2.7 gives: the source's with its
last dimension scaled by the element-size ratio, so the view covers its source's bytes exactly (a larger view
would reach past the storage, a smaller one would misplace every row)."""

from __future__ import annotations

from nki_dsl.errors import Diagnostic
from nki_dsl.ir import bitcast, hbm_views
from nki_dsl.ir.nodes import Access, Kernel
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.program import program

RULE = "hbm-view"


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    found = []
    for site in program(kernel).sites:
        op = site.op
        if op.name != hbm_views.VIEW or op.result is None:
            continue
        x = op.operands.get("x")
        if not isinstance(x, Access):
            continue  # the structure rule reports a missing operand
        problem = _problem(op, x)
        if problem:
            found.append(d.diagnostic(op, RULE, problem))
    return found


def _problem(op, x: Access) -> str | None:
    src, res = x.tensor.type, op.result.type
    if not x.is_full:
        return (f"{d.operand('x', x)} is part of %{x.tensor.name}; a view covers its whole source (index the view "
                f"instead)")  # fmt: skip
    if op.mask is not None:
        return "a view moves no data and takes no mask"
    if res.buffer != src.buffer:
        return (f"result {d.tensor(op.result)} is in '{res.buffer.value}' but its source "
                f"{d.tensor(x.tensor)} is in '{src.buffer.value}': a view is the same storage")  # fmt: skip
    why = bitcast.refusal(src.dtype, res.dtype)
    if why is not None:
        return f"view({res.dtype}) of a {src.dtype} tensor: {why}"
    want = hbm_views.viewed_shape(tuple(src.shape), src.dtype, res.dtype)
    if want is None:
        a, b = bitcast.view_bytes(src.dtype, res.dtype)
        last = src.shape[-1] * a if src.shape else 0
        return (f"the last dimension of {d.tensor(x.tensor)} holds {last} bytes, not a whole number of {b}-byte "
                f"{res.dtype} elements")  # fmt: skip
    if tuple(res.shape) != want:
        a, b = bitcast.view_bytes(src.dtype, res.dtype)
        n_src, n_res = _bytes(src.shape, a), _bytes(res.shape, b)
        size = (f"reaches {n_res - n_src} bytes past the end of its source" if n_res > n_src else
                f"covers {n_res} of its source's {n_src} bytes" if n_res < n_src else "holds the same bytes in "
                "another shape")  # fmt: skip
        return (f"result {d.tensor(op.result)} {size}: a view of {d.tensor(x.tensor)} as {res.dtype} has shape "
                f"{d.dims(want)} (the last dimension scaled by {a}/{b}, §2.7)")  # fmt: skip
    return None


def _bytes(shape, item: int) -> int:
    n = item
    for s in shape:
        n *= s
    return n
