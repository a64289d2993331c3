"""Reader and writer for the IDX format used by MNIST and Fashion-MNIST.

IDX is tiny and self-describing, so we parse it ourselves instead of
depending on torchvision: a 4-byte magic (two zero bytes, a dtype code, the
number of dimensions), one big-endian uint32 per dimension, then the data in
big-endian row-major order. Files may be gzip-compressed; we detect that from
the content (magic 1f 8b), never from the file name, because distributions
and download scripts disagree about suffixes.

The payload is read (and decompressed) straight into the array it becomes,
byte-swapped there: a file takes its array's size once, never the file's
bytes, their decompressed copy and the array at the same time.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path
from typing import BinaryIO

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


#: The bytes read at once: gzip's reader decompresses a whole request into bytes of its own before copying it.
_CHUNK = 2**20


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (plain or gzip) into a native-endian numpy array.

    Raises DataError naming ``path`` and the problem if the file is missing,
    has a bad header, or its payload does not match the declared dimensions.
    """
    path = Path(path)
    try:
        with path.open("rb") as raw:
            if raw.read(2) != _GZIP_MAGIC:
                raw.seek(0)
                return _read_stream(path, raw)
            raw.seek(0)
            try:
                with gzip.GzipFile(fileobj=raw) as unzipped:
                    return _read_stream(path, unzipped)
            except (OSError, EOFError, zlib.error) as exc:
                raise DataError(f"{path}: corrupt or truncated gzip data ({exc})") from None
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read file ({exc.strerror or exc})") from None


def _read_into(stream: BinaryIO, view: memoryview) -> int:
    """Fill ``view`` from ``stream`` as far as it goes; the bytes read."""
    done = 0
    while done < len(view):
        got = stream.readinto(view[done : done + _CHUNK])
        if not got:
            break
        done += got
    return done


def _bytes_left(stream: BinaryIO) -> int | None:
    """The bytes after the stream's position, for a plain file; None for a decompressed one (unknown)."""
    if isinstance(stream, gzip.GzipFile):
        return None
    return os.fstat(stream.fileno()).st_size - stream.tell()


def _read_stream(path: Path, stream: BinaryIO) -> np.ndarray:
    head = stream.read(4)
    if len(head) < 4:
        raise DataError(f"{path}: not an IDX file (only {len(head)} bytes, header needs 4)")
    if head[0] != 0 or head[1] != 0:
        raise DataError(f"{path}: not an IDX file (magic must start with two zero bytes, got {head[:2].hex()})")
    code, ndim = head[2], head[3]
    if code not in _CODE_TO_DTYPE:
        accepted = ", ".join(f"0x{c:02X}" for c in _CODE_TO_DTYPE)
        raise DataError(f"{path}: unknown IDX dtype code 0x{code:02X} (accepted: {accepted})")
    if ndim == 0:
        raise DataError(f"{path}: IDX header declares 0 dimensions")
    header_len = 4 + 4 * ndim
    sizes = stream.read(4 * ndim)
    if len(sizes) < 4 * ndim:
        raise DataError(
            f"{path}: truncated IDX header ({ndim} dimensions need {header_len} bytes, file has {4 + len(sizes)})"
        )
    dims = tuple(int(d) for d in np.frombuffer(sizes, dtype=">u4"))
    dtype = _CODE_TO_DTYPE[code]
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    left = _bytes_left(stream)
    if left is not None and left < expected:  # a plain file shorter than its header says: nothing allocated
        raise DataError(
            f"{path}: IDX payload truncated: dims {dims} of {dtype.name} need {expected} bytes, found {left}"
        )
    try:
        arr = np.empty(dims, dtype=dtype)
    except (MemoryError, ValueError):
        raise DataError(f"{path}: its IDX header declares {dims} of {dtype.name}: more than memory holds") from None
    actual = _read_into(stream, memoryview(arr.reshape(-1).view(np.uint8)))
    if actual == expected and stream.read(1):  # data after the payload: count it, to say how much
        actual += 1
        while chunk := stream.read(_CHUNK):
            actual += len(chunk)
    if actual != expected:
        what = "truncated" if actual < expected else "has trailing data"
        raise DataError(
            f"{path}: IDX payload {what}: dims {dims} of {dtype.name} need {expected} bytes, found {actual}"
        )
    if dtype.byteorder == ">":  # to native order, in place
        return arr.byteswap(inplace=True).view(dtype.newbyteorder("="))
    return arr


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
