"""Verifying a shape family once for its whole declared range (at publish time), and its form (at load time).

A family (``ir/symbols.py``) stands for one concrete kernel per value of its base symbols. Checking a few of them
proves nothing about the rest: an unmasked ``x[128*i0 + d0]`` over ``N`` rows in ``ceil(N / 128)`` tiles is in
bounds at ``N = 128`` and ``N = 65536`` and out of bounds at ``N = 200``. So each verifier rule is covered by an
argument that holds for every instance, and a rule without one refuses the family (``RULE_ARGUMENTS`` must name
every rule the verifier has; a new rule fails a test until it is argued here).

The form the family must have makes most of the arguments simple. Symbols may appear only in (a) dimensions of
HBM tensors (parameters and HBM allocations), (b) loop stops, (c) masks (an op's, and a reduction's
``reduce_mask`` over its input's axes, which every rule reads where it reads the op's: ``mask-vars``, ``structure``,
``out-of-bounds`` through ``_mask_for``, the budgets' constraint counts) and (d) index expressions into HBM tensors
(a tile that starts at a symbolic multiple of rows: ``out[2048*$_1 + 128*i3 + d0, ...]``); never in an op's view
shape, an index into an on-chip tensor, an on-chip type, another op's result type, an attribute or the grid
(``check_form``). Every size symbol is >= 0 everywhere (its interval's lower end). Then, instance by instance, only
(a)-(d) differ; (d) is read by ``out-of-bounds`` (proved with the symbols as variables) and ``affine-dependence``
(below), and by no other rule (the rules that read index expressions read on-chip ones, or an indirect DMA's form,
or count terms, which substitution only folds). Which rules read (a)-(c) (grep the rules for ``.mask``,
``trip_count``/``.stop`` and ``type.shape``): masks are read by
``mask-vars`` (which variables: the same in every instance), ``structure`` (well-formed: likewise) and
``out-of-bounds``; trip counts by ``structure`` (ints: every instance's are; a loop's bounds fit 32 bits, which
can only break more as they grow: the upper kernel's structure refusals are reported, below),
``affine-dependence``, the budgets and ``out-of-bounds``; HBM dimensions by ``structure`` (sizes >= 0: the
intervals), ``rank`` (how many: fixed),
``shape`` (allocations are exempt, and a reshape keeps each symbolic dimension as a dimension of its own,
``_reshape_form``, so its element-count check gives every instance the lowest one's answer) and
``out-of-bounds``. So:

* ``BLIND`` rules read none of (a)-(c) (structure, buffers, partitions, PSUM, matmul shapes, ranks, dtypes,
  scopes, where shared HBM is made, outputs written, on-chip capacity (``sbuf-capacity`` and ``psum-banks`` place
  the lowered kernel's tensors by program position and on-chip size, never a trip count; as lowering reads one,
  whether a loop runs at all, their answer at the top of the range is reported too), the double-row mode's target and
  dtypes, kernel-chosen placements (on-chip types, index expressions and program order; its replay of a block tensor's
  accesses, which counts iterations, does not run over loops with a symbolic stop while the lowest instance is checked,
  ``verify/block_schedule.SYMBOLIC_LOOPS``: each instance gets it when instantiated), an indirect DMA's
  form (its index tile's type, which axes its mask names), the extents a traced mask was built from (``mask-shape``:
  the tracer's ints, against an op's view or result shape, which ``check_form`` keeps concrete), the sync ops'
  form (the launch, whether a mask is
  present, ranks in ``pid0``, on-chip shapes), bit-cast views (on-chip dtypes and index expressions, program order);
  an HBM dtype view's shapes (``check_form`` keeps symbols out of both: the view of a symbolic tensor would scale
  a symbol); ``core-race`` checks only LNC=2 kernels and kernels with sync ops, both of which ``check_form`` keeps
  out of families, so it finds nothing in any instance;
  ``shape`` reads HBM dimensions only through a reshape's element count, which ``_reshape_form`` makes the same
  question in every instance). They give every instance the same answer: checking one (the
  lowest) is checking all. Everything the lowest instance breaks is reported: it is a real instance.
* ``MONOTONE`` rules can only break more as trip counts and sizes grow, and read no mask: the budgets (op
  executions are sums of products of trip counts, memory sums of products of sizes) and ``affine-dependence``
  (two iterations meeting is an integer point in boxes ``[0, trip - 1]``; a larger box holds every point of a
  smaller one, and only loops with more than one iteration are considered, a set that grows with the trip
  count). So they are checked once on the *upper kernel*, every symbol at the top of its interval: every
  instance's trip counts and sizes are at most those, so an upper kernel that passes proves every instance.
  (The upper kernel need not be an instance itself: only these rules look at it.) Symbols in index expressions
  (d) change where an access lands, not how many iterations there are, so ``affine-dependence`` also needs them
  to cancel: it asks whether two iterations of one loop L meet on a tensor, an equality between two accesses'
  indices inside L, and when every access to that tensor inside L has the same multiple of each symbol on each
  dimension, the symbol terms are equal on both sides of every such equality, in every instance and in the upper
  kernel alike (``_offsets_cancel`` refuses a family where they differ). It asks only about tensors L writes or
  accumulates into (the rule pairs every read with a write or an accumulation), so reads of a tensor L only reads
  may carry any symbol terms.
* ``PROVEN`` rules are proved symbolically over the whole range: ``out-of-bounds`` asks, per access and tensor
  dimension, whether any integer point of symbols (in their ranges, derived ones tied to their definitions by
  linear constraints, stepped ones to their multiples), loop indices (``i <= stop - 1`` with a symbolic
  ``stop``), program ids and axes, passing the op's mask, puts the index below 0 or at or past the dimension
  (``verify/integer_sets.py``, exact, and "maybe" when its search gives up, which refuses the family). The
  questions of one proof share ``MAX_PROOF_STEPS`` steps of that search: past them the family is refused, naming
  the access being proved and the bound (family IR is untrusted text, bounded in time). ``mask-range`` bounds
  each mask constraint's magnitude by its terms' over the variables' ranges, shape symbols over their intervals:
  run on the family's IR, its bound holds for every instance.

Diagnostics carry rule ``shape-family`` for the family's form and the broken rule's own id otherwise, and name
the dimension and its range.
"""

from __future__ import annotations

import math

from nki_dsl.errors import Diagnostic, NkiVerificationError, SourceLoc
from nki_dsl.ir.affine import SYMBOL_RE, Affine, Mask
from nki_dsl.ir.budget import DEFAULT_BUDGET, IRBudget
from nki_dsl.ir.indirect import DIM as INDIRECT_DIM
from nki_dsl.ir.indirect import hbm_operand
from nki_dsl.ir.instantiate import instantiate, substitute
from nki_dsl.ir.nodes import Access, Kernel, Loop, Op
from nki_dsl.ir.ops import DECLARED, OPS, REDUCE_MASK
from nki_dsl.ir.ops.collectives import SYNC_OPS
from nki_dsl.ir.symbols import SymbolError, affine_bounds, check_table, is_symbol, ranges, ties
from nki_dsl.targets import Target
from nki_dsl.verify import describe as d
from nki_dsl.verify import verify_kernel
from nki_dsl.verify.allocator_view import Lowering
from nki_dsl.verify.block_schedule import SYMBOLIC_LOOPS
from nki_dsl.verify.integer_sets import Work, WorkExhaustedError, at_least, has_point
from nki_dsl.verify.rational_sets import may_have_point
from nki_dsl.verify.rules import RULE_IDS, mask_range
from nki_dsl.verify.rules.out_of_bounds import _mask_for

RULE = "shape-family"
PLACING_RULES = ("sbuf-capacity", "psum-banks")  # they read the lowered kernel: also reported at the top (below)
# The exact integer search's budget per question, after elimination could not rule a break out: its "maybe" refuses
# the family (safe), and a few hundred halvings settle the families real kernels make.
INTEGER_NODES = 300
# The integer search's steps (constraints read or rewritten, verify/integer_sets.py) one proof may take over all its
# questions: untrusted IR text is bounded in time. The library's families take at most a few thousand (3,781 was
# the most over tests/trace and tests/hub); a hostile family that spends them all is refused in a few seconds, naming
# the access it was proving and this bound.
MAX_PROOF_STEPS = 250_000
BLIND, MONOTONE, PROVEN = "blind", "monotone", "proven"
RULE_ARGUMENTS = {
    "structure": BLIND, "mask-vars": BLIND, "mask-shape": BLIND, "operand-buffer": BLIND, "partition-limit": BLIND,
    "psum-tile-size": BLIND, "psum-banks": BLIND, "matmul-shape": BLIND, "partition-mismatch": BLIND,
    "shape": BLIND, "rank": BLIND, "dtype": BLIND, "scope": BLIND, "output-written": BLIND, "sbuf-capacity": BLIND,
    "double-row": BLIND, "shared-hbm-scope": BLIND, "direct-allocation": BLIND, "indirect-dma": BLIND,
    "core-sync": BLIND, "bitcast": BLIND, "core-race": BLIND, "hbm-view": BLIND,
    "affine-dependence": MONOTONE, "budget": MONOTONE,
    "out-of-bounds": PROVEN, "mask-range": PROVEN,
}  # fmt: skip


def _diag(loc: SourceLoc, op: str, message: str, rule: str = RULE) -> Diagnostic:
    return Diagnostic(loc, op, rule, message)


def _is_sym(name) -> bool:
    """A shape symbol's name (``$N``); anything else, well formed or not, is for the verifier's rules to judge."""
    return isinstance(name, str) and SYMBOL_RE.fullmatch(name) is not None


def _names(values) -> str:
    return ", ".join(f"{n[1:]} = {v}" for n, v in values.items())


# -- the form ------------------------------------------------------------------------------------------------------


def check_form(kernel: Kernel) -> list[Diagnostic]:
    """Where symbols may appear (see the module docstring); also run on every family a loader parses, so the
    instances it makes are well formed whatever the symbols' values."""
    top = SourceLoc(kernel.source_file, 0)
    try:
        check_table(kernel.symbols)
    except SymbolError as e:
        return [_diag(top, "kernel", str(e))]
    if not kernel.symbols:
        return [_diag(top, "kernel", "a shape family declares at least one symbol")]
    intervals = ranges(kernel.symbols)
    found: list[Diagnostic] = []
    if kernel.lnc != 1:  # core-race's question reads index expressions and trip counts: concrete kernels only
        found.append(_diag(top, "kernel", f"a shape family cannot be an LNC={kernel.lnc} launch (its cores are "
                                          f"race-checked per concrete shape); publish concrete shapes"))  # fmt: skip
    bound = {s for p in kernel.params for s in p.type.shape if is_symbol(s)}
    for name, s in kernel.symbols.items():
        if s.is_base and name not in bound:
            found.append(_diag(top, "kernel", f"dimension {s.label} is no dimension of a parameter, so a call cannot "
                                              f"bind it from its arrays"))  # fmt: skip

    def sizes(shape, where: str, loc: SourceLoc, op: str, allowed: bool) -> None:
        for s in shape:
            if not is_symbol(s):
                continue
            if not allowed:
                found.append(_diag(loc, op, f"{where} uses dimension {s[1:]}; only HBM tensors' dimensions may be "
                                            f"symbolic (a tile has concrete sizes)"))  # fmt: skip
            elif s not in kernel.symbols:
                found.append(_diag(loc, op, f"{where} uses {s}, which is not a declared symbol"))
            elif intervals[s][0] < 0:
                found.append(_diag(loc, op, f"{where}: dimension {s[1:]} may be negative (down to {intervals[s][0]})"))

    for p in kernel.params:
        sizes(p.type.shape, f"parameter %{p.name}", top, "kernel", not p.type.buffer.on_chip)
    for stmt, _loops in kernel.walk():
        if isinstance(stmt, Loop):
            if is_symbol(stmt.stop):
                sizes((stmt.stop,), f"loop {stmt.var}'s stop", stmt.loc, "loop", True)
            continue
        if stmt.result is not None:  # only an HBM allocation declares its own (symbolic) shape
            t = stmt.result.type
            declared = OPS[stmt.name].result is DECLARED if stmt.name in OPS else False
            sizes(t.shape, f"result %{stmt.result.name}", stmt.loc, stmt.name, declared and not t.buffer.on_chip)
        for oname, v in stmt.operands.items():
            if isinstance(v, Access):
                whole = stmt.name == "hbm.reshape" and v.shape == v.tensor.type.shape  # a view of all of x
                sizes(v.shape, f"operand '{oname}''s view", stmt.loc, stmt.name, whole)
                used = sorted({x for x in v.vars() if _is_sym(x)})
                if used and v.tensor.type.buffer.on_chip:
                    found.append(_diag(stmt.loc, stmt.name, f"operand '{oname}' indexes on-chip %{v.tensor.name} "
                                                            f"with a dimension symbol; only HBM indices, masks and "
                                                            f"loop stops may use them"))  # fmt: skip
                for x in used:
                    if x not in kernel.symbols:
                        found.append(_diag(stmt.loc, stmt.name, f"operand '{oname}' uses {x}, which is not a "
                                                                f"declared symbol"))  # fmt: skip
        for aname, v in stmt.attrs.items():
            if aname == REDUCE_MASK.name and isinstance(v, Mask):  # (c): a reduction's mask over its input's axes
                found += [_diag(stmt.loc, stmt.name, f"attribute {aname!r} uses {x}, which is not a declared symbol")
                          for x in sorted(v.vars()) if _is_sym(x) and x not in kernel.symbols]  # fmt: skip
            elif isinstance(v, Affine | Mask) and any(_is_sym(x) for x in v.vars()):
                found.append(_diag(stmt.loc, stmt.name, f"attribute {aname!r} uses a dimension symbol; only masks "
                                                        f"and loop stops may"))  # fmt: skip
            elif isinstance(v, tuple) and any(isinstance(x, str) for x in v):
                if stmt.name != "hbm.reshape" or aname != "shape":
                    found.append(_diag(stmt.loc, stmt.name, f"attribute {aname!r} uses a dimension symbol; only a "
                                                            f"reshape's shape may"))  # fmt: skip
                else:
                    sizes(v, f"attribute {aname!r}", stmt.loc, stmt.name, True)
        if stmt.name == "hbm.reshape" and stmt.result is not None and isinstance(stmt.operands.get("x"), Access):
            found += _reshape_form(stmt)
        if stmt.name == "hbm.view" and stmt.result is not None and any(is_symbol(s) for s in stmt.result.type.shape):
            found.append(_diag(stmt.loc, stmt.name, "a dtype view's shape cannot use a dimension symbol (it scales "
                                                    "the source's concrete last dimension); publish concrete shapes"))
        if stmt.mask is not None:
            for x in stmt.mask.vars():
                if _is_sym(x) and x not in kernel.symbols:
                    found.append(_diag(stmt.loc, stmt.name, f"the mask uses {x}, which is not a declared symbol"))
        if stmt.name in SYNC_OPS:  # core-race's phases follow trip counts: argued for concrete kernels only
            found.append(_diag(stmt.loc, stmt.name, "a shape family cannot hold sync ops (nisa.sendrecv, "
                                                    "nisa.core_barrier); publish concrete shapes"))  # fmt: skip
    return found


def _reshape_form(op: Op) -> list[Diagnostic]:
    """A reshape keeps its element count in every instance when both shapes hold the same symbols as dimensions of
    their own (each a factor of both counts) and the concrete rest has equal products: then the ``shape`` rule,
    which counts elements, answers the same for every instance, and checking the lowest is checking all."""
    def split(shape):
        syms = sorted(s for s in shape if is_symbol(s))
        return syms, math.prod(s for s in shape if not is_symbol(s))

    (src_syms, _), (out_syms, _) = split(op.operands["x"].tensor.type.shape), split(op.result.type.shape)
    found = []
    attr, shape = op.attrs.get("shape"), tuple(op.result.type.shape)
    if attr is not None and tuple(attr) != shape and any(map(is_symbol, (*attr, *shape))):
        found.append(_diag(op.loc, op.name, f"attribute shape = {list(attr)} is not the result's shape "
                                            f"{list(op.result.type.shape)} symbol for symbol"))  # fmt: skip
    if src_syms != out_syms:
        names = [", ".join(s[1:] for s in syms) or "none" for syms in (src_syms, out_syms)]
        found.append(_diag(op.loc, op.name, f"the reshape of a tensor with symbolic dimensions {names[0]} to one with "
                                            f"{names[1]} may change the element count with the size; a family's "
                                            f"reshape keeps each symbolic dimension as a dimension"))  # fmt: skip
    return found


# -- the proof -----------------------------------------------------------------------------------------------------


def prove(kernel: Kernel, target: Target, budget: IRBudget | None = None, *, lowering: Lowering) -> list[Diagnostic]:
    """Every way the family may break a rule for some instance in its declared range, or ``[]`` when every rule is
    proved for all of them (see the module docstring for the argument per rule). ``lowering`` is the verifier's
    (``verify_kernel``): callers use ``passes/verifier.prove``, which passes the pipeline's."""
    found = check_form(kernel)
    if found:
        return found
    top = SourceLoc(kernel.source_file, 0)
    unargued = [r for r in RULE_IDS if r not in RULE_ARGUMENTS]
    for r in unargued:
        found.append(_diag(top, "kernel", f"rule {r} has no argument over a shape family's range "
                                          f"(verify/family.py), so no family can be proved"))  # fmt: skip
    lowest = {n: s.lo for n, s in kernel.symbols.items() if s.is_base}
    # A real instance: whatever it breaks is broken (and it is the check of every rule on the parts no symbol
    # reaches, out-of-bounds included for accesses the symbolic proof below skips).
    token = SYMBOLIC_LOOPS.set(frozenset(_symbolic_loops(kernel.body)))
    try:
        at_lowest = verify_kernel(instantiate(kernel, lowest), target, lowering=lowering)
        found += [_at(diag, f"at {_names(lowest)}") for diag in at_lowest]
    finally:
        SYMBOLIC_LOOPS.reset(token)
    upper_values = {n: hi for n, (lo, hi) in ranges(kernel.symbols).items()}
    upper = substitute(kernel, upper_values)
    for diag in verify_kernel(upper, target, budget, lowering=lowering):
        # ``structure`` too: it reads trip counts (a loop's bounds fit 32 bits), and while it refuses, the rules after
        # it (the budgets among them) do not run, so nothing would be proved of the top (N up to 2**38 passed so)
        if RULE_ARGUMENTS.get(diag.rule) == MONOTONE or diag.rule in PLACING_RULES or diag.rule == "structure":
            found.append(_at(diag, f"at the top of the family ({_names(upper_values)})"))
    found += _offsets_cancel(kernel)
    found += _out_of_bounds(kernel)
    found += mask_range.check(kernel, target)  # its bound takes each symbol at its interval's larger end
    return _unique(found)


def _symbolic_loops(body):
    """The variables of the loops whose stop is a symbol (at any depth)."""
    for s in body:
        if isinstance(s, Loop):
            if not isinstance(s.stop, int):
                yield s.var
            yield from _symbolic_loops(s.body)


def prove_or_raise(kernel: Kernel, target: Target, budget: IRBudget | None = DEFAULT_BUDGET, *,
                   lowering: Lowering) -> Kernel:  # fmt: skip
    """``prove``, raising ``NkiVerificationError`` with every diagnostic; the default budget is the loader's, so a
    family that is proved also fits the budget every instance is checked against when it is loaded."""
    found = prove(kernel, target, budget, lowering=lowering)
    if found:
        raise NkiVerificationError(found)
    return kernel


def _at(diag: Diagnostic, where: str) -> Diagnostic:
    return Diagnostic(diag.loc, diag.op, diag.rule, f"{where}: {diag.message}")


def _unique(found: list[Diagnostic]) -> list[Diagnostic]:
    seen, out = set(), []
    for diag in sorted(found, key=lambda x: (x.loc.line, x.rule)):
        if diag not in seen:
            seen.add(diag)
            out.append(diag)
    return out


def _symbol_terms(a: Access) -> tuple:
    """Per tensor dimension, the access's multiples of the symbols in its index (``((("$_1", 2048),), ())``)."""
    return tuple(tuple(sorted((v, c) for v, c in e.terms if _is_sym(v))) for e in a.index)


def _offsets_cancel(kernel: Kernel) -> list[Diagnostic]:
    """``affine-dependence``'s side condition over symbols in indices (module docstring): inside each loop, the
    accesses to one tensor the loop writes carry the same symbol terms on every dimension. A tensor the loop only
    reads needs nothing: the rule pairs a read only with a write or an accumulation inside the same loop, so reads
    at any offsets (a fused projection's q, k and v columns ``h * D``, ``(H + h) * D``, ...) never form a pair."""
    written = set()  # (id of loop, id of tensor) of the tensors each loop writes or accumulates into
    for stmt, loops in kernel.walk():
        if not isinstance(stmt, Loop):
            for name, a in stmt.operands.items():
                if isinstance(a, Access) and OPS[stmt.name].operand(name).role.writes:
                    written.update((id(lp), id(a.tensor)) for lp in loops)
    found = []
    first: dict[tuple[int, int], tuple] = {}  # (id of loop, id of tensor) -> the first access's symbol terms
    for stmt, loops in kernel.walk():
        if isinstance(stmt, Loop):
            continue
        for name, a in stmt.operands.items():
            if not isinstance(a, Access):
                continue
            terms = _symbol_terms(a)
            for lp in loops:
                if (id(lp), id(a.tensor)) not in written:
                    continue
                seen = first.setdefault((id(lp), id(a.tensor)), terms)
                if seen != terms and (any(terms) or any(seen)):
                    found.append(d.diagnostic(stmt, "affine-dependence", (
                        f"operand '{name}' indexes {d.typed(a.tensor)} with other multiples of the family's "
                        f"dimensions than another access to it inside loop {lp.var} does, so whether two "
                        f"iterations meet may depend on the size; index every access inside the loop from the "
                        f"same symbolic offset, or declare the dimension concrete")))  # fmt: skip
                    break
    return found


def _out_of_bounds(kernel: Kernel) -> list[Diagnostic]:
    symbols = kernel.symbols
    tied, quotients = ties(symbols)
    tied = [at_least(c) for c in tied]
    grid = kernel.grid or (1,)
    pids = {f"pid{n}": (0, g - 1) for n, g in enumerate(grid)}
    found = []
    answers: dict[tuple, str | None] = {}  # a kernel repeats its accesses (per head, per tile): ask once
    work = Work(MAX_PROOF_STEPS)
    for stmt, loops in kernel.walk():
        if isinstance(stmt, Loop) or stmt.name == "hbm.reshape":  # a reshape views its whole source: no element
            continue
        symbolic_loops = {lp.var for lp in loops if is_symbol(lp.stop)}
        masked = stmt.mask is not None and any(_is_sym(v) for v in stmt.mask.vars())
        for name, a in stmt.operands.items():
            if not isinstance(a, Access):
                continue
            # A dimension whose size is concrete, whose index uses no symbol and no loop with a symbolic stop, under a
            # mask free of symbols, is the same in every instance: the lowest instance's verification checked it. An
            # indirect DMA's indexed dimension is widened, as the verifier's rules widen it (ir/indirect.widened): its
            # index is a placeholder for rows known at run time, where every backend checks them against the dimension.
            rows = stmt.attrs.get(INDIRECT_DIM) if name == hbm_operand(stmt) else None
            dims = [k for k, (e, size) in enumerate(zip(a.index, a.tensor.type.shape))
                    if k != rows and (masked or is_symbol(size)
                                      or any(v in symbolic_loops or _is_sym(v) for v in e.vars()))]  # fmt: skip
            if not dims:
                continue
            key = (a.tensor.type.shape, a.index, a.shape, tuple(dims), tuple(_mask_for(stmt, a)),
                   tuple((lp.var, lp.start, lp.stop, lp.step) for lp in loops))  # fmt: skip
            if key not in answers:
                try:
                    answers[key] = _access_problem(stmt, a, loops, symbols, tied, pids | quotients, dims, work)
                except WorkExhaustedError as e:
                    family = ", ".join(symbols[x].describe() for x in sorted(_symbols_of(a, loops, stmt)))
                    found.append(d.diagnostic(stmt, "out-of-bounds", (
                        f"proving that {d.operand(name, a)} stays inside {d.typed(a.tensor)} for every size of the "
                        f"family ({family}) takes more than {e.limit} steps of the integer search, the bound on a "
                        f"family proof's work (verify/family.MAX_PROOF_STEPS); simplify its masks and derived "
                        f"dimensions, or publish concrete shapes")))  # fmt: skip
                    return found  # the work is spent: no question after this one can be answered either
            if answers[key]:
                message = _fill(answers[key], d.typed(a.tensor), d.operand(name, a))
                found.append(d.diagnostic(stmt, "out-of-bounds", message))
    return found


def _access_problem(op: Op, a: Access, loops: tuple[Loop, ...], symbols, tied, pids,
                    dims: list[int], work: Work) -> str | None:  # fmt: skip
    """The message (with ``{tensor}`` and ``{operand}`` fields) if some instance may index outside the tensor on one
    of ``dims``."""
    intervals = ranges(symbols)
    box = dict(intervals) | pids
    constraints = list(tied)
    env: dict[str, Affine] = {}
    for lp in loops:
        stop_hi = intervals[lp.stop][1] if is_symbol(lp.stop) else lp.stop
        if stop_hi <= lp.start:
            return None  # a loop that never runs in any instance
        k = f"{lp.var}.k"  # i = start + step * k for an iteration number k >= 0, with i <= stop - 1
        box[k] = (0, (stop_hi - 1 - lp.start) // lp.step)
        env[lp.var] = Affine.var(k, lp.step) + lp.start
        stop = Affine.var(lp.stop) if is_symbol(lp.stop) else Affine((), lp.stop)
        constraints.append(at_least(stop - 1 - env[lp.var]))
    box.update({f"d{k}": (0, s - 1) for k, s in enumerate(a.shape)})
    if any(s <= 0 for s in a.shape):
        return None
    constraints += [at_least(c.substitute(env)) for c in _mask_for(op, a)]
    for dim in dims:
        expr, size = a.index[dim], a.tensor.type.shape[dim]
        e = expr.substitute(env)
        lo, hi = affine_bounds(e, symbols, box)
        if lo >= 0 and hi < (intervals[size][0] if is_symbol(size) else size):
            continue  # inside the smallest size over the whole box, masks aside: no question to ask
        bound = Affine.var(size) if is_symbol(size) else Affine((), size)
        for violation, what in ((e - bound, f"reach {str(size).lstrip('$')}"), (-e - 1, "go below 0")):
            trial = constraints + [at_least(violation)]
            if may_have_point(trial, box) and has_point(trial, box, INTEGER_NODES, work):
                family = ", ".join(symbols[x].describe() for x in sorted(_symbols_of(a, loops, op)))
                return (f"out-of-bound access for tensor {{tensor}} on dimension {dim}: for some size of the "
                        f"family ({family}) the index {expr} ({{operand}}) may {what}; restrict the op to the valid "
                        f"elements with mask=, or declare the dimension concrete")  # fmt: skip
    return None


def _fill(message: str, tensor: str, operand: str) -> str:
    """A memoised answer for this access: answers are shared by accesses of equal form into different tensors."""
    return message.replace("{tensor}", tensor, 1).replace("{operand}", operand, 1)


def _symbols_of(a: Access, loops: tuple[Loop, ...], op: Op) -> set[str]:
    """The dimension symbols an access's bounds depend on: its tensor's, its index's, its loops' stops', its
    mask's."""
    names = {s for s in a.tensor.type.shape if is_symbol(s)} | {lp.stop for lp in loops if is_symbol(lp.stop)}
    names |= {v for e in a.index for v in e.vars() if _is_sym(v)}
    if op.mask is not None:
        names |= {v for v in op.mask.vars() if _is_sym(v)}
    return names
