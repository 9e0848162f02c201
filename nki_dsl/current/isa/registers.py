"""The scalar registers of the current API: ``nisa.register_alloc``, ``register_move``, ``register_load`` and
``register_store`` (reference/nki.md §2.6 lists them; §1.1: each engine's sequencer has 32-bit scalar registers).

reference/nki.md gives no signatures for these four; they follow the NKI 0.6 API docs as this project reads
them (choices, where the docs are thin, marked *[choice]*):

* ``register_alloc(x=None)`` returns a register, initialised to the int ``x`` when given;
* ``register_move(dst, imm)`` sets register ``dst`` to the int ``imm``;
* ``register_load(dst, src)`` sets register ``dst`` to the one element of tensor ``src`` (SBUF or HBM);
* ``register_store(dst, src)`` writes register ``src`` into the one element of tensor ``dst`` (SBUF or HBM).

A register is modelled as a ``[1, 1]`` int32 SBUF tensor (``ir/runtime_loops.py``): the register ops are the
copies and fills they are on the data, so every backend, the verifier's dependence rules and the allocator see
them without an op of their own. *[choice]* The cost model therefore prices a register load from HBM as a DMA
and a move as a Vector-engine memset, where hardware runs them on an engine's sequencer; both are small next to
the loops they bound. Registers bound runtime loops (``nl.dynamic_range``, ``nl.fori_loop``, ``nl.while_loop``)
and are not Python values: ``int(reg)`` or ``if reg:`` cannot see what the hardware will hold.
"""

from __future__ import annotations

from nki_dsl.current.isa.data_movement import dma_copy, memset, tensor_copy
from nki_dsl.errors import NkiApiError
from nki_dsl.ir.runtime_loops import register_problem
from nki_dsl.language.creation import ndarray  # (the current API's nl.ndarray without address= is this one)
from nki_dsl.trace.builder import caller_loc, current
from nki_dsl.trace.tensor import is_tile

REGISTER_DTYPE = "int32"  # §1.1: 32-bit scalar registers


def _int(api: str, what: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise NkiApiError(f"{what} must be a Python int, got {type(value).__name__} {value!r}", caller_loc(), api)
    if not -(1 << 31) <= value < (1 << 31):
        raise NkiApiError(f"{what}={value} does not fit a 32-bit register", caller_loc(), api)
    return value


def check_register(api: str, what: str, reg):
    """``reg`` as the register it must be (a one-element integer SBUF tile), or NkiApiError naming ``what``."""
    if not is_tile(reg):
        raise NkiApiError(f"'{what}' must be a register (nisa.register_alloc), got {type(reg).__name__}",
                          caller_loc(), api)  # fmt: skip
    problem = register_problem(reg.access())
    if problem is not None:
        raise NkiApiError(f"'{what}' is not a register: {problem.replace('its register', 'the tensor')} (make one "
                          f"with nisa.register_alloc, or nisa.register_load a tensor's element into it)",
                          caller_loc(), api)  # fmt: skip
    return reg


def _one_element(api: str, what: str, t) -> None:
    if not is_tile(t):
        raise NkiApiError(f"'{what}' must be a tensor, got {type(t).__name__}", caller_loc(), api)
    shape = tuple(t.access().shape)
    if any(s != 1 for s in shape):
        raise NkiApiError(f"'{what}' must be one element (a register holds one value), not shape {list(shape)}",
                          caller_loc(), api)  # fmt: skip


def register_alloc(x=None):
    """A new register, set to ``x`` when it is given (else uninitialised, like any new tensor)."""
    api = "nisa.register_alloc"
    current(api)
    reg = ndarray((1, 1), REGISTER_DTYPE, buffer=None, name="reg")
    if x is not None:
        register_move(reg, _int(api, "x", x))
    return reg


def register_move(dst, imm):
    """Register ``dst`` = the int ``imm``."""
    api = "nisa.register_move"
    check_register(api, "dst", dst)
    memset(dst=dst, value=_int(api, "imm", imm))


def _copy(dst, src, memory):
    """A register moves to or from ``memory`` by an on-chip copy, or by a DMA when ``memory`` is in HBM."""
    if memory.access().tensor.type.buffer.on_chip:
        tensor_copy(dst=dst, src=src)
    else:
        dma_copy(dst=dst, src=src)


def register_load(dst, src):
    """Register ``dst`` = the one element of ``src`` (SBUF, or HBM through a DMA), converted to int32."""
    api = "nisa.register_load"
    check_register(api, "dst", dst)
    _one_element(api, "src", src)
    _copy(dst, src, memory=src)


def register_store(dst, src):
    """The one element of ``dst`` (SBUF, or HBM through a DMA) = register ``src``."""
    api = "nisa.register_store"
    check_register(api, "src", src)
    _one_element(api, "dst", dst)
    _copy(dst, src, memory=dst)
