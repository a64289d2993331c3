"""Reader and writer for the IDX format used by MNIST and Fashion-MNIST.

IDX is tiny and self-describing, so we parse it ourselves instead of
depending on torchvision: a 4-byte magic (two zero bytes, a dtype code, the
number of dimensions), one big-endian uint32 per dimension, then the data in
big-endian row-major order. Files may be gzip-compressed; we detect that from
the content (magic 1f 8b), never from the file name, because distributions
and download scripts disagree about suffixes.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from netfl.errors import DataError

__all__ = ["read_idx", "write_idx"]

_GZIP_MAGIC = b"\x1f\x8b"

# IDX dtype code -> big-endian numpy dtype.
_CODE_TO_DTYPE: dict[int, np.dtype] = {
    0x08: np.dtype("u1"),
    0x09: np.dtype("i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_KIND_SIZE_TO_CODE: dict[tuple[str, int], int] = {(dt.kind, dt.itemsize): code for code, dt in _CODE_TO_DTYPE.items()}


def _read_bytes(path: Path) -> bytes:
    """Return the file's (decompressed) content, raising DataError on I/O problems."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read file ({exc.strerror or exc})") from None
    if raw[:2] == _GZIP_MAGIC:
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataError(f"{path}: corrupt or truncated gzip data ({exc})") from None
    return raw


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (plain or gzip) into a native-endian numpy array.

    Raises DataError naming ``path`` and the problem if the file is missing,
    has a bad header, or its payload does not match the declared dimensions.
    """
    path = Path(path)
    data = _read_bytes(path)
    if len(data) < 4:
        raise DataError(f"{path}: not an IDX file (only {len(data)} bytes, header needs 4)")
    if data[0] != 0 or data[1] != 0:
        raise DataError(f"{path}: not an IDX file (magic must start with two zero bytes, got {data[:2].hex()})")
    code, ndim = data[2], data[3]
    if code not in _CODE_TO_DTYPE:
        accepted = ", ".join(f"0x{c:02X}" for c in _CODE_TO_DTYPE)
        raise DataError(f"{path}: unknown IDX dtype code 0x{code:02X} (accepted: {accepted})")
    if ndim == 0:
        raise DataError(f"{path}: IDX header declares 0 dimensions")
    header_len = 4 + 4 * ndim
    if len(data) < header_len:
        raise DataError(
            f"{path}: truncated IDX header ({ndim} dimensions need {header_len} bytes, file has {len(data)})"
        )
    dims = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = _CODE_TO_DTYPE[code]
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    actual = len(data) - header_len
    if actual != expected:
        what = "truncated" if actual < expected else "has trailing data"
        raise DataError(
            f"{path}: IDX payload {what}: dims {dims} of {dtype.name} need {expected} bytes, found {actual}"
        )
    arr = np.frombuffer(data, dtype=dtype, offset=header_len).reshape(dims)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write ``array`` as a plain (uncompressed) IDX file.

    Meant for tests and for users preparing small data sets; the dtype must
    be one IDX supports (uint8, int8, int16, int32, float32, float64).
    """
    arr = np.asarray(array)
    key = (arr.dtype.kind, arr.dtype.itemsize)
    if key not in _KIND_SIZE_TO_CODE or arr.ndim == 0 or arr.ndim > 255:
        raise ValueError(
            f"cannot write dtype {arr.dtype} with {arr.ndim} dims as IDX "
            "(accepted: uint8, int8, int16, int32, float32, float64; 1..255 dims)"
        )
    code = _KIND_SIZE_TO_CODE[key]
    header = bytes([0, 0, code, arr.ndim]) + np.asarray(arr.shape, dtype=">u4").tobytes()
    payload = np.ascontiguousarray(arr, dtype=_CODE_TO_DTYPE[code]).tobytes()
    Path(path).write_bytes(header + payload)
