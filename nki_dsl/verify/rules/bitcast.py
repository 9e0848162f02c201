"""Rule ``bitcast``: a reinterpretation ``t.view(dtype)`` (``nisa.tensor_copy`` with ``view_bytes``, ``ir/bitcast.py``;
reference/nki.md §2.7 ``.view(dtype)`` = ``reinterpret_cast``) reads what hardware would read.

* ``view_bytes`` are the source's and the result's element sizes, neither dtype is ``bool``, and the copy runs on
  a bit-exact engine (§2.7 tensor_copy: Vector and GpSimd copy bits; ScalarE goes through fp32);
* the source's last axis is contiguous (§2.7: "last dim contiguous"), and no mask cuts the view;
* the view is a copy made when it is traced, so nothing may write into it (hardware would write the source) and
  it may not be read after its source was written, in program order or around a loop that holds the write and
  the read but not the view (hardware would read the new bits). Make the view after the last write of its source.
"""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import Diagnostic
from nki_dsl.ir import bitcast
from nki_dsl.ir.nodes import Access, Kernel
from nki_dsl.ir.ops import OPS
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.program import common_depth, program

RULE = "bitcast"


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    prog = program(kernel)
    found = []
    for site in prog.sites:
        op = site.op
        if op.name != "nisa.tensor_copy" or not op.attrs.get("view_bytes") or op.result is None:
            continue
        src = op.operands.get("src")
        if not isinstance(src, Access):
            continue
        a, b = src.tensor.type.dtype, op.result.type.dtype
        problems = []
        why = bitcast.refusal(a, b)
        if why is not None:
            problems.append(f"view({b}) of a {a} tile: {why}")
        elif tuple(op.attrs["view_bytes"]) != bitcast.view_bytes(a, b):
            problems.append(f"view_bytes {list(op.attrs['view_bytes'])} are not the element sizes of {a} and {b} "
                            f"{list(bitcast.view_bytes(a, b))}")  # fmt: skip
        if op.attrs.get("engine") not in bitcast.ENGINES:
            problems.append(f"a bit-cast runs on a bit-exact copy engine ({', '.join(bitcast.ENGINES)}), not "
                            f"{op.attrs.get('engine')}")  # fmt: skip
        if op.mask is not None:
            problems.append("a bit-cast view is not masked (slice the source instead)")
        if not _contiguous_last(src):
            problems.append(f"the last axis of {d.operand('src', src)} is not contiguous in its tensor")
        problems += _uses(prog, site, src, op.result)
        found += [d.diagnostic(op, RULE, p) for p in problems]
    return found


def _contiguous_last(a: Access) -> bool:
    """The access's last axis steps through its tensor's last dimension one element at a time and through no other
    dimension (§2.7 "last dim contiguous"). Other axes may step through the last dimension too: an on-chip tile of
    three or more dimensions is stored as [P, F] and read as ``[d0, 8*d1 + d2]``, whose last axis is contiguous."""
    if not a.index or not a.shape or a.shape[-1] == 1:
        return True
    last = f"d{len(a.shape) - 1}"
    strides = [e.coefs.get(last, 0) for e in a.index]
    return strides[-1] == 1 and not any(strides[:-1])


def _role(use):
    return OPS[use.site.op.name].operand(use.name).role


def _uses(prog, view_site, src: Access, result) -> list[str]:
    out = []
    for use in prog.uses.get(result, ()):
        if _role(use).writes:
            out.append(f"line {use.site.op.loc.line} ({use.site.op.name}) writes into this view of "
                       f"{d.typed(src.tensor)}, which would leave {d.ref(src.tensor)} unchanged here: write a tensor "
                       f"of {dtypes.get(result.type.dtype).name} and view it back")  # fmt: skip
    writes = [u.site for u in prog.uses.get(src.tensor, ()) if _role(u).writes and u.site is not view_site]
    for use in prog.uses.get(result, ()):
        if not _role(use).reads:
            continue
        k = common_depth(view_site.loops, use.site.loops)
        around = use.site.loops[k] if k < len(use.site.loops) else None
        for w in writes:
            stale = (around in w.loops and w.pos > view_site.pos) if around is not None else (
                view_site.pos < w.pos < use.site.pos)  # fmt: skip
            if stale:
                out.append(f"line {use.site.op.loc.line} reads this view after line {w.op.loc.line} wrote "
                           f"{d.typed(src.tensor)}: the view holds the bits from before that write; make the view "
                           f"after it")  # fmt: skip
                break
    return out
