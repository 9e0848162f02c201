"""``nl.static_cast(data, dtype)``: a scalar or a tile converted to another dtype (legacy ``neuronxcc.nki``,
reference/nki.md §2.2 and "Legacy items": "cast a scalar or array to a new dtype", nothing more documented)."""

from __future__ import annotations

import numpy as np

from nki_dsl import dtypes
from nki_dsl.errors import NkiApiError
from nki_dsl.trace.builder import caller_loc
from nki_dsl.trace.tensor import build_op, is_tile


def static_cast(input_data, dtype):
    """``input_data`` converted to ``dtype`` (an ``nl`` dtype, a NumPy dtype or a dtype name).

    A tile becomes a new SBUF tile of ``dtype``: each value converted as an engine writes it (floats rounded to
    nearest even, beyond the range +-inf; float to integer rounded to nearest even and saturated). A Python or
    NumPy scalar becomes the Python number a tile of ``dtype`` would hold (``static_cast(0.1, nl.bfloat16)`` is
    0.10009765625), so it can be used as a compile-time constant."""
    name = dtypes.normalize(dtype, "static_cast dtype")
    if is_tile(input_data):
        t = input_data.access().tensor
        if not t.type.buffer.on_chip:  # said here: the verifier would name the nl.copy this builds
            raise NkiApiError(
                f"input_data %{t.name} is in '{t.type.buffer.value}'; static_cast converts on-chip tiles "
                f"(nl.load it, with dtype= to convert on the way)",
                caller_loc(),
                "nl.static_cast",
            )
        return build_op("nl.copy", {"x": input_data}, dtype=name)
    if isinstance(input_data, bool | int | float | np.number | np.bool_):
        return dtypes.held_value(name, input_data.item() if isinstance(input_data, np.generic) else input_data)
    raise NkiApiError(
        f"input_data must be a tile or a Python number, got {type(input_data).__name__}", caller_loc(), "nl.static_cast"
    )
