"""Tensor types: shape, dtype and the memory a tensor lives in."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from nki_dsl import dtypes


class Buffer(StrEnum):
    HBM = "hbm"  # alias of private_hbm in NKI; kernel parameters live here
    SHARED_HBM = "shared_hbm"
    PRIVATE_HBM = "private_hbm"
    SBUF = "sbuf"
    PSUM = "psum"

    @property
    def on_chip(self) -> bool:
        return self in (Buffer.SBUF, Buffer.PSUM)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class TensorType:
    """``shape`` includes leading block dimensions for on-chip tensors; ``par_axis`` is the index of the
    partition dimension (0 unless declared with ``nl.par_dim``). HBM tensors are linear: ``par_axis`` is 0."""

    shape: tuple[int, ...]
    dtype: str
    buffer: Buffer
    par_axis: int = 0

    @property
    def partitions(self) -> int:
        return self.shape[self.par_axis] if self.shape else 1

    @property
    def free_shape(self) -> tuple[int, ...]:
        return self.shape[self.par_axis + 1 :]

    @property
    def block_shape(self) -> tuple[int, ...]:
        return self.shape[: self.par_axis]

    @property
    def bytes_per_partition(self) -> int:
        """Bytes each partition holds: free elements times itemsize, times the block count."""
        n = dtypes.get(self.dtype).itemsize
        for s in self.shape[: self.par_axis] + self.shape[self.par_axis + 1 :]:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        n = dtypes.get(self.dtype).itemsize
        for s in self.shape:
            n *= s
        return n

    def describe(self) -> str:
        dims = ", ".join(str(s) for s in self.shape)
        return f"{dtypes.get(self.dtype).short}[{dims}] in '{self.buffer.value}'"
