"""``nki.typing``: annotations kernels may carry (``tile: nt.tensor[128, 512] = ...``); accepted and unchecked."""

from __future__ import annotations


class _Subscriptable:
    def __init__(self, name: str):
        self.name = name

    def __getitem__(self, shape):
        return self

    def __repr__(self) -> str:
        return f"nki.typing.{self.name}"


tensor = _Subscriptable("tensor")
mutable_tensor = _Subscriptable("mutable_tensor")
scalar = _Subscriptable("scalar")
