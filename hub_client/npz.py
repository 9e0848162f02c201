"""Test vectors as ``.npz`` with fixed zip timestamps: ``numpy.savez`` stamps the current time, which would make
two builds of the same bundle differ byte for byte."""

from __future__ import annotations

import io
import zipfile

import numpy as np

from hub_client.errors import BundleError

_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())
    return out.getvalue()


# Test vectors come from a downloaded bundle: untrusted. A few kilobytes of deflate can declare gigabytes (a 1 MB
# file made a 1 GB array; an .npy header alone had NumPy allocate what it declares before reading the data), so
# every member's declared size is checked before anything is decompressed. A bundle's inputs are at most
# bundle.MAX_TEST_VECTOR_ELEMENTS (2**17) elements, its output of the same order: 64 MiB is far above both.
MAX_MEMBERS = 64
MAX_BYTES = 64 << 20  # all arrays together, as their headers declare them and as the zip declares its members


def load_npz(data: bytes) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` file, read without pickle, within ``MAX_MEMBERS`` arrays and ``MAX_BYTES``;
    ``BundleError`` for anything else (not a zip, not ``.npy`` members, object arrays, truncated data)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_MEMBERS or sum(i.file_size for i in infos) > MAX_BYTES + 4096 * len(infos):
                raise BundleError(f"test vectors: more than {MAX_MEMBERS} arrays or {MAX_BYTES >> 20} MiB")
            declared = 0
            for info in infos:
                if not info.filename.endswith(".npy"):
                    raise BundleError(f"test vectors: member {info.filename[:64]!r} is not an .npy array")
                with zf.open(info) as f:
                    shape, dtype = _header(f)
                declared += int(np.prod(shape, dtype=object)) * dtype.itemsize
                if declared > MAX_BYTES:
                    raise BundleError(f"test vectors: the arrays declare more than {MAX_BYTES >> 20} MiB")
            out = {}
            for info in infos:
                with zf.open(info) as f:
                    out[info.filename[: -len(".npy")]] = np.lib.format.read_array(f, allow_pickle=False)
            return out
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, NotImplementedError) as e:
        raise BundleError(f"test vectors: not a readable .npz file ({type(e).__name__}: {str(e)[:200]})") from None


def _header(f) -> tuple[tuple[int, ...], np.dtype]:
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise BundleError(f"test vectors: .npy format version {version} (1.0 and 2.0 are read)")
    if dtype.hasobject:
        raise BundleError("test vectors: an object array (only plain numeric arrays are read, never pickles)")
    return shape, dtype
