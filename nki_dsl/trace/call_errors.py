"""Turn Python's own ``TypeError`` for a wrongly called ``nl``/``nisa`` function into an NKI error at the kernel
line, naming the op and, for a misspelled keyword, the keyword it resembles:

    softmax.py:8: nl.load: unexpected keyword argument 'dtpye'; did you mean 'dtype'?

Python raises these while binding the arguments, before any of our code runs, so one check here covers every
function of the language without wrapping each one. The error is only rewritten when it certainly comes from
binding a call to an ``nki_dsl`` function on a kernel line: the innermost traceback frame is outside the
package, the instruction that raised is a call whose callee resolves (by names and attributes only, nothing is
evaluated) to an ``nki_dsl`` function, and Python's message names that function.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import inspect
import linecache
import re

from nki_dsl.errors import NkiApiError, NkiError, SourceLoc
from nki_dsl.trace.builder import API_NAMESPACES, caller_loc, in_package

_BINDING = re.compile(r"^(?P<name>[\w.<>]+)\(\) (?P<problem>.+)$", re.DOTALL)
_UNEXPECTED = re.compile(r"^got an unexpected keyword argument '(?P<kw>\w+)'$")


def api_call_error(exc: TypeError) -> NkiApiError | None:
    """The NKI error for ``exc``, or None when ``exc`` is not an argument error of a call to the NKI API."""
    if isinstance(exc, NkiError):
        return None
    m = _BINDING.match(str(exc))
    tb = exc.__traceback__
    if m is None or tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame
    if in_package(frame.f_code.co_filename):
        return None  # our own code called something wrongly: a bug to see as is, not a kernel mistake
    fn = _callee(frame, tb.tb_lasti)
    if fn is None or getattr(fn, "__qualname__", None) != m["name"]:
        return None
    op = _op_name(fn)
    if op is None:
        return None
    loc = SourceLoc(frame.f_code.co_filename, tb.tb_lineno)
    return NkiApiError(_explain(fn, op, m["problem"]), loc, op)


def binding_error(fn, op: str, args: tuple, kwargs: dict) -> NkiApiError | None:
    """For a wrapper of ours that called the API function ``fn`` (``op``) with the kernel's arguments and got a
    TypeError: the NKI error at the kernel line if those arguments do not fit ``fn``'s signature, else None (the
    TypeError came from inside ``fn``)."""
    signature = _signature(fn)
    if signature is None:
        return None
    open_ended = any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values())
    unknown = next((k for k in kwargs if k not in signature.parameters and not open_ended), None)
    if unknown is not None:  # first, as Python reports it (before a required argument the misspelling left out)
        return NkiApiError(_explain(fn, op, f"got an unexpected keyword argument '{unknown}'"), caller_loc(), op)
    try:
        signature.bind(*args, **kwargs)
    except TypeError as e:
        return NkiApiError(_explain(fn, op, str(e)), caller_loc(), op)
    return None


def _explain(fn, op: str, problem: str) -> str:
    signature = _signature(fn)
    usage = f"the signature is {op}{signature}" if signature is not None else f"see help({op})"
    unexpected = _UNEXPECTED.match(problem)
    if unexpected is None:
        return f"{problem}; {usage}"
    kw = unexpected["kw"]
    hint = did_you_mean(kw, _keywords(signature)) if signature is not None else ""
    return f"unexpected keyword argument '{kw}'; {hint or usage}"


def did_you_mean(name: str, candidates) -> str:
    """``did you mean 'dtype'?`` for the closest candidate, or "" when none is close."""
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f"did you mean '{close[0]}'?" if close else ""


def _signature(fn) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _keywords(sig: inspect.Signature) -> list[str]:
    by_keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in sig.parameters.values() if p.kind in by_keyword]


def _op_name(fn) -> str | None:
    """``nl.load`` / ``nisa.nc_matmul`` for the public namespaces, the qualified name for other package code."""
    fn = getattr(fn, "__func__", fn)
    module = getattr(fn, "__module__", "") or ""
    for package, alias in API_NAMESPACES.items():
        if module == package or module.startswith(package + "."):
            return f"{alias}.{fn.__name__}"
    if module.startswith("nki_dsl."):
        return fn.__qualname__
    return None


def _callee(frame, lasti: int):
    """The function the call at instruction offset ``lasti`` of ``frame`` names, or None."""
    positions = list(frame.f_code.co_positions())
    index = lasti // 2
    if not 0 <= index < len(positions):
        return None
    line, end_line, col, end_col = positions[index]
    if None in (line, end_line, col, end_col):
        return None
    lines = linecache.getlines(frame.f_code.co_filename, frame.f_globals)
    if end_line > len(lines):
        return None
    chunk = [s.encode() for s in lines[line - 1 : end_line]]  # columns are UTF-8 byte offsets
    chunk[-1] = chunk[-1][:end_col]
    chunk[0] = chunk[0][col:]
    try:
        node = ast.parse(b"".join(chunk).decode(), mode="eval").body
    except (SyntaxError, UnicodeDecodeError):
        return None
    return _resolve(node.func, frame) if isinstance(node, ast.Call) else None


def _resolve(node, frame):
    if isinstance(node, ast.Name):
        for scope in (frame.f_locals, frame.f_globals, vars(builtins)):
            if node.id in scope:
                return scope[node.id]
        return None
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, frame)
        return getattr(base, node.attr, None) if base is not None else None
    return None
