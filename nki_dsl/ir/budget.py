"""Resource budgets for untrusted IR: how much text, structure and work a parsed kernel may ask for.

IR text arrives from outside (Hub bundles), so before anything compiles or runs it the parser and the verifier
(``verify/budgets.py``) bound what it costs: the size of the text and of every string and expression in it while
parsing (so parsing stays linear and shallow), and the op count, loop nesting, iteration space and memory of the
kernel it describes. Every refusal is an ``NkiVerificationError`` whose diagnostic has rule ``budget`` and names
the field and the value, so a caller knows which limit to raise.

The defaults fit every real kernel with a wide margin (the tutorials, the ``kernels/`` packages and every
specialisation the test suite traces; ``tests/verify/test_budgets.py`` measures them) while keeping the worst
hostile kernel to seconds of parsing and bounded memory. Callers tighten or loosen them per call:
``nki.parse_ir(text, budget=nki.IRBudget(max_ops=1000))``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from nki_dsl.errors import Diagnostic, NkiApiError, NkiVerificationError, SourceLoc

GIB = 1 << 30
RULE = "budget"


@dataclass(frozen=True)
class IRBudget:
    # -- text (checked while parsing) --
    # UTF-8 bytes of the whole text: 400x the largest real kernel's. Valid text reads at ~0.6 s of CPU per MB; a
    # syntax error costs lark's parse (~2-4 s per MB), so the worst refusal takes seconds, not minutes.
    max_text_bytes: int = 4 << 20
    max_string_chars: int = 1 << 20  # one string literal (nl.shared_constant data is the long one: base64)
    max_expression_terms: int = 256  # terms of one affine expression, or constraints of one mask
    max_value_depth: int = 8  # nesting of tuples in a value (constants, shape attributes)
    # -- structure (checked while parsing and by the verifier) --
    max_ops: int = 20_000  # ops plus loops (1 MB of IR holds ~14,000; NumPy compiles ~25,000 per second)
    max_loop_depth: int = 8  # nested loops (Python's compiler allows 20 nested blocks in all; see verify/budgets.py)
    max_grid_rank: int = 4  # SPMD grid axes
    # -- work and memory (checked by the verifier) --
    max_iterations: int = 1 << 22  # op executions: grid size x enclosing loops' trip counts, summed over ops
    max_tensor_bytes: int = 4 * GIB  # one tensor, or one access view's elements at 4 bytes (compute in fp32)
    max_hbm_bytes: int = 16 * GIB  # all HBM tensors together (host memory a run needs); also <= the target's HBM

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise NkiApiError(f"IRBudget.{f.name} must be an int >= 0, not {value!r}")


DEFAULT_BUDGET = IRBudget()


def budget_diagnostic(field: str, value: int, limit: int, what: str, loc: SourceLoc, op: str = "kernel") -> Diagnostic:
    return Diagnostic(loc, op, RULE, f"budget {field} exceeded: {what} is {value:,}, the budget allows {limit:,}")


def refuse(field: str, value: int, limit: int, what: str, loc: SourceLoc, op: str = "kernel") -> NkiVerificationError:
    """The error for one exceeded budget (raised by the parser, which stops at the first)."""
    return NkiVerificationError([budget_diagnostic(field, value, limit, what, loc, op)])
