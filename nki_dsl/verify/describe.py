"""How diagnostics name things: tensors, operands, loops, buffers and sizes, in one consistent wording.

Messages use the names of the IR text (``%acc``, ``%3``) so the same words point into a traced kernel and into
IR parsed from a Hub bundle, and add what a kernel author recognises: shapes, buffers and source lines.
"""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import Diagnostic
from nki_dsl.ir.nodes import Access, Loop, Op, Tensor
from nki_dsl.ir.ops.spec import HBM, ON_CHIP

LOOP_API = {"affine": "affine_range", "sequential": "sequential_range", "dynamic": "dynamic_range",
            "while": "while_loop", "scalar_offset": "scalar_offset"}


def diagnostic(op: Op, rule: str, message: str) -> Diagnostic:
    return Diagnostic(op.loc, op.name, rule, message)


def dims(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def ref(tensor: Tensor) -> str:
    return f"%{tensor.name}"


def typed(t: Tensor) -> str:
    """``%acc f32[128, 512]``."""
    return f"{ref(t)} {dtypes.get(t.type.dtype).short}{dims(t.type.shape)}"


def tensor(t: Tensor) -> str:
    """``%acc f32[128, 512] in 'psum'``."""
    return f"{typed(t)} in '{t.type.buffer.value}'"


def access(a: Access) -> str:
    """``%a[128, 512] in 'hbm'``: the tensor and the shape of the tile the access reads or writes."""
    return f"{ref(a.tensor)}{dims(a.shape)} in '{a.tensor.type.buffer.value}'"


def operand(name: str, a: Access) -> str:
    return f"operand '{name}' {access(a)}"


def loop(lp: Loop) -> str:
    """``affine_range loop i0 (line 12)``."""
    return f"{LOOP_API.get(lp.kind, lp.kind)} loop {lp.var} (line {lp.loc.line})"


def loops(lps: list[Loop]) -> str:
    """``affine_range loops i0 (line 3) and i1 (line 5)``; all of one kind."""
    if len(lps) == 1:
        return loop(lps[0])
    api = LOOP_API.get(lps[0].kind, lps[0].kind)
    return f"{api} loops " + " and ".join(f"{lp.var} (line {lp.loc.line})" for lp in lps)


def buffers(allowed) -> str:
    """``'sbuf' or 'psum'``; the three HBM kinds read as ``HBM``."""
    allowed = tuple(allowed)
    if set(allowed) == set(HBM):
        return "HBM ('hbm', 'shared_hbm' or 'private_hbm')"
    if set(allowed) == set(HBM) | set(ON_CHIP):
        return "any buffer"
    quoted = [f"'{b}'" for b in allowed]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def live_tensors(live, size) -> list[str]:
    """``%acc f32[128, 512] in 'psum' (1 bank, line 7)`` for each live range, ``size(tensor)`` its share."""
    return [f"{tensor(r.tensor)} ({size(r.tensor)}, line {r.site.op.loc.line})" for r in live]


def nbytes(n: int) -> str:
    """``512 B``, ``2 KiB``, ``1.5 KiB``."""
    if n < 1024:
        return f"{n} B"
    kib = n / 1024
    return f"{kib:.0f} KiB" if kib == int(kib) else f"{kib:.1f} KiB"


def plural(n: int, word: str, many: str = "") -> str:
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def listing(items: list[str], limit: int = 5) -> str:
    """At most ``limit`` items, then ``and N more``."""
    shown = items[:limit]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")
