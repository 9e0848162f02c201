"""Reductions and statistics: free-axis reductions (Vector), reductions across partitions (GpSimd), and the
batch-norm statistics pair ``bn_stats`` / ``bn_aggr``.

``bn_stats`` layout (six values per partition, as NKI documents it)::

    [count_even, mean_even, count_even * var_even, count_odd, mean_odd, count_odd * var_odd]

over the even- and odd-indexed elements of the flattened free axes. Each triple is (n, mean, M2) with M2 the sum
of squared deviations, so ``bn_aggr`` combines any number of triples (the concatenation of several ``bn_stats``
outputs along the free axis) with Chan's parallel formula into the exact mean and population variance of all the
elements they describe. Keep the statistics in fp32 (``dtype=nl.float32``) for an exact combination.
"""

from __future__ import annotations

from nki_dsl.ir.ops.isa import REDUCE_OPS
from nki_dsl.isa.arguments import flag, fn_name, ints
from nki_dsl.trace.tensor import build_op


def tensor_reduce(op, data, axis, *, mask=None, dtype=None, negate=False, keepdims=False):
    """The ``op``-reduction (add, max, min, multiply, logical and/or, bitwise and/or) of ``data`` along free
    ``axis`` (an int or tuple; not the partition axis 0) on the Vector engine; ``-reduction`` with ``negate``.
    ``keepdims`` keeps the reduced axes with size 1. The result dtype defaults to ``data``'s."""
    name = "nisa.tensor_reduce"
    attrs = {
        "op": fn_name(name, "op", op, REDUCE_OPS),
        "axis": ints(name, "axis", axis),
        "negate": flag(name, "negate", negate),
        "keepdims": flag(name, "keepdims", keepdims),
    }
    return build_op(name, {"data": data}, attrs, dtype=dtype, mask=mask)


def tensor_partition_reduce(op, data, *, mask=None, dtype=None):
    """The ``op``-reduction of ``data`` across its partitions on the GpSimd engine: ``[P, F] -> [1, F]``."""
    name = "nisa.tensor_partition_reduce"
    return build_op(name, {"data": data}, {"op": fn_name(name, "op", op, REDUCE_OPS)}, dtype=dtype, mask=mask)


def bn_stats(data, *, mask=None, dtype=None):
    """Per-partition mean/variance statistics of ``data`` (``[P, F]``, F <= 512) on the Vector engine:
    a ``[P, 6]`` tile laid out as in this module's docstring. The result dtype defaults to ``data``'s."""
    return build_op("nisa.bn_stats", {"data": data}, dtype=dtype, mask=mask)


def bn_aggr(data, *, mask=None, dtype=None):
    """Mean and population variance per partition, ``[P, 2]``, from ``data`` ``[P, 3*k]``: one or more
    ``bn_stats`` outputs concatenated along the free axis (any (count, mean, count*var) triples)."""
    return build_op("nisa.bn_aggr", {"data": data}, dtype=dtype, mask=mask)
