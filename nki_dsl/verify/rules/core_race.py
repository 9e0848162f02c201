"""Rule ``core-race``: in a kernel whose two cores run at once (an LNC=2 launch, ``Kernel.lnc``, or a kernel whose
cores meet at sync ops, ``nisa.sendrecv``, ``nisa.core_barrier``), no element of shared HBM is written by one core
and read or written by the other in the same *phase*, the stretch between two consecutive sync points
(reference/nki.md §2.7 "Multi-core": the barrier is how the cores order their accesses to shared HBM). An LNC=2
kernel without sync ops is one phase: its cores must touch disjoint parts, as a kernel split by
``nl.program_id(0)`` does.

On hardware the two cores run at once, so such a pair races; the backends run a phase on one core after the other
(``ir/cores.py``), which gives one of the race's outcomes, not the kernel's. So the kernel is refused, with both
lines, instead of silently computing that outcome.

The question per pair of accesses (one a write) to a tensor both cores see (a kernel argument or an
``nl.shared_hbm`` tensor, through any ``reshape`` or dtype ``view`` of it) and per assignment of the two accesses to
the two cores is exact: is there an integer point of loop iterations and tile axes where both touch the same byte
(row-major flat index) and both are in the same phase? A phase is counted by the sync ops executed before an op:
an affine function of the iteration numbers of the loops holding sync ops (a loop whose body executes ``s`` sync
ops starts iteration ``k`` at ``k * s`` past its entry). ``verify/integer_sets.py`` answers; its "maybe" (search
budget spent) counts as a race, the safe side. Masks are not read (an op under a mask counts as touching its whole
tile), also the safe side; the rows of an indirect DMA are any row of its dimension (``ir/indirect.py``).

A legacy SPMD grid ``kernel[2]`` (``lnc`` 1) without sync ops is not checked: its programs run one after another on
one core (§1.5), so what one writes the next may read.
"""

from __future__ import annotations

from nki_dsl import dtypes
from nki_dsl.errors import Diagnostic
from nki_dsl.ir.affine import Affine
from nki_dsl.ir.cores import has_sync_ops
from nki_dsl.ir.hbm_views import VIEW_OPS
from nki_dsl.ir.indirect import widened
from nki_dsl.ir.nodes import Access, Kernel, Loop, Op
from nki_dsl.ir.ops import OPS
from nki_dsl.ir.ops.collectives import SYNC_OPS
from nki_dsl.ir.types import Buffer
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify.integer_sets import equal, has_point
from nki_dsl.verify.program import program

RULE = "core-race"
CORES = 2


def check(kernel: Kernel, target: Target) -> list[Diagnostic]:
    if tuple(kernel.grid) != (CORES,) or not (kernel.lnc == CORES or has_sync_ops(kernel)):
        return []
    phases: dict[int, Affine] = {}
    _phases(kernel.body, Affine(), phases)
    roots = _roots(kernel)
    shared = {t for t in roots.values() if t.kind == "param" or t.type.buffer == Buffer.SHARED_HBM}
    sides: dict[object, list] = {}
    for site in program(kernel).sites:
        op = site.op
        if op.name in SYNC_OPS or op.name in VIEW_OPS:
            continue
        for name, a in op.operands.items():
            if not isinstance(a, Access) or a.tensor.type.buffer.on_chip or roots.get(a.tensor) not in shared:
                continue
            role = OPS[op.name].operand(name).role
            sides.setdefault(roots[a.tensor], []).append((site, widened(op, name, a), role.writes))
    found, seen = [], set()
    for accesses in sides.values():
        overlapping = _overlapping(accesses)
        for i, (sa, a, writes) in enumerate(accesses):
            if not writes:
                continue
            for j in sorted(overlapping.get(i, {})):
                sb, b, b_writes = accesses[j]
                key = (id(sa.op), id(sb.op))
                if key in seen or (id(sb.op), id(sa.op)) in seen:
                    continue
                for ca in range(CORES):
                    if ca in overlapping[i][j] and _race(sa, a, ca, sb, b, 1 - ca, phases):
                        seen.add(key)
                        found.append(d.diagnostic(sa.op, RULE, _message(sa.op, a, ca, sb.op, b, b_writes)))
                        break
    return found


def _overlapping(accesses: list) -> dict[int, dict[int, set[int]]]:
    """``[i][j]``: the cores ``c`` for which access ``i`` on core ``c`` and access ``j`` on the other core span
    overlapping ranges of flat elements, one of them a write. Only those pairs can race, so only they get the exact
    question; a sweep over the ranges sorted by their start finds them without comparing every pair (a kernel
    unrolled into hundreds of tiles per core would otherwise spend seconds proving its tiles disjoint)."""
    extents = []
    for n, (site, access, _) in enumerate(accesses):
        for core in range(CORES):
            lo, hi = _extent(site, access, core)
            extents.append((lo, hi, n, core))
    extents.sort(key=lambda e: (e[0], e[1]))
    out: dict[int, dict[int, set[int]]] = {}
    active: list[tuple] = []
    for lo, hi, n, core in extents:
        active = [e for e in active if e[1] >= lo]
        for _, _, m, other in active:
            if other != core and (accesses[n][2] or accesses[m][2]):
                out.setdefault(n, {}).setdefault(m, set()).add(core)
                out.setdefault(m, {}).setdefault(n, set()).add(other)
        active.append((lo, hi, n, core))
    return out


def _extent(site, access: Access, core: int) -> tuple[float, float]:
    """The smallest and largest flat element ``access`` touches on ``core`` over its loops and tile axes (the whole
    line when it depends on a variable with no known range)."""
    ranges: dict[str, tuple[int, int]] = {}
    flat, _ = _side(site, access, core, Affine(), "x", ranges)
    if any(v not in ranges for v in flat.vars()):
        return float("-inf"), float("inf")
    return flat.bounds(ranges)


def _message(op_a: Op, a: Access, ca: int, op_b: Op, b: Access, b_writes: bool) -> str:
    other = "writes" if b_writes else "reads"
    where = "this line" if op_a is op_b else f"line {op_b.loc.line} ({op_b.name})"
    return (f"core {ca} writes {d.access(a)} and core {1 - ca} {other} {d.access(b)} at {where} in the same phase "
            f"(no sync op between them): the two cores of the LNC=2 launch run at once and race on the same "
            f"elements; order them with nisa.core_barrier(data=%{a.tensor.name}, cores=(0, 1)) between the two, or "
            f"give each core its own part (index by nl.program_id(0))")  # fmt: skip


def _roots(kernel: Kernel) -> dict:
    """Every HBM tensor -> the tensor whose storage it is (an HBM view's root, ir/hbm_views.py)."""
    roots = {t: t for t in kernel.params}
    for stmt, _ in kernel.walk():
        if isinstance(stmt, Op) and stmt.result is not None:
            src = stmt.operands.get("x") if stmt.name in VIEW_OPS else None
            roots[stmt.result] = roots.get(src.tensor, src.tensor) if isinstance(src, Access) else stmt.result
    return roots


def _sync_count(body) -> int:
    n = 0
    for s in body:
        if isinstance(s, Loop):
            n += s.trip_count * _sync_count(s.body)
        elif s.name in SYNC_OPS:
            n += 1
    return n


def _phases(body, base: Affine, out: dict) -> int:
    """Record each op's phase (sync ops executed before it, in iteration numbers ``k_<loop var>``); return the
    sync ops ``body`` executes."""
    count = 0
    for stmt in body:
        if isinstance(stmt, Loop):
            per = _sync_count(stmt.body)
            start = base + count + (Affine.var(f"k_{stmt.var}", per) if per else Affine())
            _phases(stmt.body, start, out)
            count += per * stmt.trip_count
        elif stmt.name in SYNC_OPS:
            count += 1
        else:
            out[id(stmt)] = base + count
    return count


def _side(site, access: Access, core: int, phase: Affine, tag: str, ranges: dict) -> tuple[Affine, Affine]:
    """(flat byte index, phase) of one side, its variables renamed apart with ``tag`` into ``ranges``."""
    env: dict[str, Affine | int] = {"pid0": core}
    rename = {}
    for lp in site.loops:
        k = f"k_{lp.var}_{tag}"
        ranges[k] = (0, max(0, lp.trip_count - 1))
        env[lp.var] = Affine.var(k, lp.step) + lp.start
        rename[f"k_{lp.var}"] = k
    for j, n in enumerate(access.shape):
        ranges[f"d{j}_{tag}"] = (0, max(0, n - 1))
        env[f"d{j}"] = Affine.var(f"d{j}_{tag}")
    flat, stride = Affine(), 1
    for e, n in zip(reversed(access.index), reversed(access.tensor.type.shape)):
        flat = flat + e.substitute(env) * stride
        stride *= n
    item = dtypes.get(access.tensor.type.dtype).itemsize  # in bytes: views of one storage may differ in dtype
    ranges[f"byte_{tag}"] = (0, item - 1)
    return flat * item + Affine.var(f"byte_{tag}"), phase.rename(rename)


def _race(sa, a: Access, ca: int, sb, b: Access, cb: int, phases: dict) -> bool:
    ranges: dict[str, tuple[int, int]] = {}
    fa, pa = _side(sa, a, ca, phases[id(sa.op)], "a", ranges)
    fb, pb = _side(sb, b, cb, phases[id(sb.op)], "b", ranges)
    if any(v not in ranges for e in (fa, fb, pa, pb) for v in e.vars()):
        return True  # a variable this rule cannot bound: the safe side
    return has_point([equal(fa - fb), equal(pa - pb)], ranges)
