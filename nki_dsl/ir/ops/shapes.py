"""Result-shape rules shared by op table entries."""

from __future__ import annotations


class ShapeError(ValueError):
    """An operand shape the rule cannot accept; the message names the operand."""


def broadcast(shapes: dict[str, tuple[int, ...]], attrs: dict) -> tuple[int, ...]:
    """NumPy broadcasting of every tile operand (right-aligned; 1 stretches)."""
    if not shapes:
        raise ShapeError("needs at least one tile operand")
    ndim = max(len(s) for s in shapes.values())
    out = [1] * ndim
    for s in shapes.values():
        padded = (1,) * (ndim - len(s)) + tuple(s)
        for k, e in enumerate(padded):
            if e == out[k] or e == 1:
                continue
            if out[k] == 1:
                out[k] = e
                continue
            listed = ", ".join(f"'{n}' {list(v)}" for n, v in shapes.items())
            raise ShapeError(f"operand shapes do not broadcast ({listed})")
    return tuple(out)


def same_as(operand: str):
    def rule(shapes, attrs):
        return tuple(shapes[operand])

    rule.__name__ = f"same_as_{operand}"
    return rule


def reduce_axes(operand: str):
    """Reduction over ``attrs['axis']`` (free axes), keeping them as size 1 when ``keepdims``."""

    def rule(shapes, attrs):
        shape = tuple(shapes[operand])
        axes = normalize_axes(attrs["axis"], len(shape))
        if attrs.get("keepdims", False):
            return tuple(1 if k in axes else e for k, e in enumerate(shape))
        kept = tuple(e for k, e in enumerate(shape) if k not in axes)
        if len(shape) >= 2 and 0 not in axes and len(kept) < 2:
            # A tile keeps its partition dimension and one free dimension: reducing all free axes of [P, F]
            # gives [P, 1], which broadcasts against [P, F] as the legacy rmsnorm/layernorm tutorials rely on.
            return (*kept, 1)
        return kept

    return rule


def normalize_axes(axis, ndim: int) -> tuple[int, ...]:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ShapeError(f"axis {a} is out of range for a tile of rank {ndim}")
        out.append(a % ndim)
    if len(set(out)) != len(out):  # the backends reduce over the attribute as given; NumPy refuses repeats
        raise ShapeError(f"axis {list(axes)} names an axis more than once")
    return tuple(sorted(out))


def from_attr(attr: str):
    def rule(shapes, attrs):
        return tuple(attrs[attr])

    return rule


def transposed(operand: str):
    def rule(shapes, attrs):
        s = tuple(shapes[operand])
        if len(s) != 2:
            raise ShapeError(f"operand '{operand}' {list(s)} must be 2-D to transpose")
        return (s[1], s[0])

    return rule


def declared(shapes, attrs):
    """The result carries its own type (allocations); nothing to infer."""
    return None
