"""A data set of the user's own loads within its size, and the data budget counts the peak of loading it.

An 8.9 MB ``.npz`` whose ``x`` declared 2 GB of float32 was accepted under a budget of a quarter of memory and
then peaked above 3 GB while loading: the whole array read, then converted, then copied into its training and
test halves. Now a member is read a block at a time into the dtype netfl holds it in, and the arrays netfl read
itself are split in place, so the peak is the data plus its test share (a fifth) and a few blocks. Measured
here by memory, never by time: tracemalloc sees numpy's allocations; a subprocess's peak RSS sees everything,
torch's included (VmHWM, the high-water mark of its own memory: ``ru_maxrss`` would carry over the forking
parent's, the test process's, across the exec).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from netfl.errors import DataError
from netfl.learn.data.data_budget import loading_peak, npz_sizes
from netfl.learn.data.datasets import stratified_split
from netfl.learn.data.user_data import load_user_dataset

MB = 2**20
#: What loading may hold beyond the arrays and their test share: a block being read, a block of rows being
#: moved (netfl.learn.data.user_data.READ_BYTES, user_arrays.BLOCK_BYTES) and the split's index arrays.
OVERHEAD = 32 * MB


def _write(path: Path, rows: int, cols: int, dtype: str = "float32", compressed: bool = True) -> dict:
    """A .npz of a compressible x (every row the same ramp, scaled by its row number) and labels 0..9."""
    x = np.empty((rows, cols), dtype=dtype)
    x[:] = np.linspace(0, 1, cols, dtype=dtype)
    x *= (np.arange(rows, dtype=dtype) % 7)[:, None]
    y = np.arange(rows, dtype=np.int64) % 10
    (np.savez_compressed if compressed else np.savez)(path, x=x, y=y)
    return {"x": x, "y": y}


def _peak_of(fn):
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        out = fn()
        return out, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("dtype", "compressed"), [("float32", True), ("float32", False), ("float64", False)])
def test_a_npz_loads_within_its_size_and_its_test_share(tmp_path: Path, dtype: str, compressed: bool) -> None:
    rows, cols = 20_000, 1_024  # 82 MB of float32 as netfl holds it (164 MB of float64 in the file)
    written = _write(tmp_path / "d.npz", rows, cols, dtype, compressed)
    held = rows * cols * 4 + rows * 8
    data, peak = _peak_of(lambda: load_user_dataset("d.npz", base_dir=tmp_path, test_fraction=0.2, seed=3))
    assert peak <= 1.2 * held + OVERHEAD, f"peak {peak / MB:.0f} MB for {held / MB:.0f} MB of data"
    # the same samples as the old way (the whole array, converted, then indexed): nothing lost in the moves
    assert data.train_x.dtype == torch.float32 and data.train_x.shape == (16_000, 1_024)
    assert len(data.test_x) == 4_000 and data.train_x.is_contiguous() and data.test_x.is_contiguous()
    # one buffer, read once: the test rows follow the training rows in the array the file was read into
    assert data.test_x.data_ptr() == data.train_x.data_ptr() + data.train_x.numel() * 4
    train_idx, test_idx = stratified_split(written["y"], 0.2, np.random.default_rng(3))
    x = written["x"].astype(np.float32)
    for i in (0, 1, 777, 15_999):
        assert np.array_equal(data.train_x[i].numpy(), x[train_idx[i]]), i
    for i in (0, 2_345, 3_999):
        assert np.array_equal(data.test_x[i].numpy(), x[test_idx[i]]), i
    assert np.array_equal(data.train_y.numpy(), written["y"][train_idx])
    assert np.array_equal(data.test_y.numpy(), written["y"][test_idx])
    # the budget's figure for this file holds what was measured
    sizes = {k: (s, d.name, b) for k, (s, d, b) in npz_sizes(tmp_path / "d.npz").items()}
    counted_held, counted_peak = loading_peak(sizes, "read", 0.2)
    assert counted_held == held and peak <= counted_peak + OVERHEAD


def test_a_given_test_split_is_held_without_a_copy(tmp_path: Path) -> None:
    x = np.ones((20_000, 1_024), np.float32)  # 82 MB, and its test split apart
    np.savez(tmp_path / "t.npz", x=x, y=np.zeros(20_000, np.int64), x_test=x[:100], y_test=np.zeros(100, np.int64))
    data, peak = _peak_of(lambda: load_user_dataset("t.npz", base_dir=tmp_path))
    assert peak <= 1.02 * x.nbytes + OVERHEAD and len(data.train_x) == 20_000


def test_the_budget_refuses_what_the_peak_would_exceed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget counts the peak of loading -- the arrays as netfl holds them and the test share set aside --
    not the file's bytes: a file within the budget whose loading is not is refused, before it is read."""
    _write(tmp_path / "d.npz", 1_000, 250)  # x 1 MB, y 8 kB; split: a fifth of x set aside, 1.2 MB at the peak
    monkeypatch.setenv("NETFL_DATA_BUDGET", "1.1MB")
    with pytest.raises(DataError, match=r"d.npz: its arrays take 1.01 MB once loaded and 1.21 MB while they load"):
        load_user_dataset("d.npz", base_dir=tmp_path)
    monkeypatch.setenv("NETFL_DATA_BUDGET", "1.25MB")
    assert len(load_user_dataset("d.npz", base_dir=tmp_path).train_x) == 800
    # uint8 inputs are token ids, held as int64: eight times the file's bytes
    np.savez(tmp_path / "u.npz", x=np.ones((1_000, 100), np.uint8), y=np.zeros(1_000, np.int64))
    monkeypatch.setenv("NETFL_DATA_BUDGET", "500kB")
    with pytest.raises(DataError, match=r"u.npz: its arrays take 808 kB once loaded .* x 1,000 x 100 uint8 \(100 kB\)"):
        load_user_dataset("u.npz", base_dir=tmp_path)
    # a loader's arrays stay the loader's: netfl's converted copies count on top of them
    (tmp_path / "mine.py").write_text(
        "import numpy as np\n\ndef load():\n    return {'x': np.ones((1000, 100)), 'y': np.zeros(1000, int)}\n"
    )
    monkeypatch.setenv("NETFL_DATA_BUDGET", "1MB")  # 808 kB given, 408 kB netfl's: 1.22 MB
    with pytest.raises(DataError, match=r"mine.py:load: its arrays take 408 kB once loaded and 1.22 MB while"):
        load_user_dataset("mine.py:load", base_dir=tmp_path)


def test_a_truncated_member_is_a_clear_error(tmp_path: Path) -> None:
    _write(tmp_path / "d.npz", 100, 8, compressed=False)
    with zipfile.ZipFile(tmp_path / "d.npz") as archive:
        x = archive.read("x.npy")
        y = archive.read("y.npy")
    with zipfile.ZipFile(tmp_path / "cut.npz", "w") as archive:
        archive.writestr("x.npy", x[: len(x) - 40])
        archive.writestr("y.npy", y)
    with pytest.raises(DataError, match=r"cut.npz: x is truncated: its header declares 100 x 8 float32 values"):
        load_user_dataset("cut.npz", base_dir=tmp_path)


PROBE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import numpy as np, torch
    from netfl.learn.data.user_data import load_user_dataset

    def status(field):  # bytes, from the kernel's account of this process's memory
        line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith(field + ":"))
        return int(line.split()[1]) * 1024

    before = status("VmRSS")
    data = load_user_dataset(sys.argv[1], base_dir=Path(sys.argv[2]))
    peak = status("VmHWM") - before  # the highest RSS since exec, less what was resident: at least the load's
    print(json.dumps({"peak": peak, "train": data.train_x.numel() * 4}))
    """
)


@pytest.mark.slow
def test_the_whole_process_peaks_within_the_data_and_its_test_share(tmp_path: Path) -> None:
    """Peak RSS of a process that loads the data set (torch's memory included): the tensors share the arrays'
    memory, so no copy is made on the way to them."""
    rows, cols = 50_000, 1_024  # 205 MB of float32
    _write(tmp_path / "d.npz", rows, cols, compressed=False)
    held = rows * cols * 4 + rows * 8
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, "d.npz", str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert probe.returncode == 0, probe.stderr
    measured = json.loads(probe.stdout)
    assert measured["train"] == 40_000 * cols * 4
    assert measured["peak"] <= 1.2 * held + OVERHEAD, (
        f"peak RSS {measured['peak'] / MB:.0f} MB, {held / MB:.0f} MB data"
    )


def test_splitting_in_place_touches_neither_the_file_nor_the_callers_arrays(tmp_path: Path) -> None:
    """A .pt is memory-mapped copy-on-write: its rows moved in place change the process's pages, not the file.
    A loader's or a caller's arrays are theirs: copied, never reordered."""
    x = torch.arange(1_000 * 16, dtype=torch.float32).reshape(1_000, 16)
    y = torch.arange(1_000) % 10
    torch.save({"x": x, "y": y}, tmp_path / "d.pt")
    before = (tmp_path / "d.pt").read_bytes()
    data = load_user_dataset("d.pt", base_dir=tmp_path, seed=4)
    assert (tmp_path / "d.pt").read_bytes() == before
    train, test = stratified_split(y.numpy(), 0.2, np.random.default_rng(4))
    assert torch.equal(data.train_x, x[train]) and torch.equal(data.test_x, x[test])
    assert torch.equal(data.train_y, y[train]) and torch.equal(data.test_y, y[test])
    given = {"x": x.numpy().copy(), "y": y.numpy().copy()}
    data = load_user_dataset(None, base_dir=None, loader=given, seed=4)
    assert np.array_equal(given["x"], x.numpy()) and np.array_equal(given["y"], y.numpy())
    assert torch.equal(data.train_x, x[train]) and torch.equal(data.test_x, x[test])


@pytest.mark.parametrize("compressed", [False, True])
def test_an_idx_file_is_read_into_its_array_alone(tmp_path: Path, compressed: bool) -> None:
    """MNIST's format (the built-in image sets): the payload is read, decompressed and byte-swapped in the array
    it becomes -- not the file's bytes, their decompressed copy and then the array."""
    import gzip

    from netfl.learn.data.idx import read_idx, write_idx

    images = np.empty((10_000, 28, 28), np.float32)  # 31 MB, big-endian in the file
    images[:] = np.linspace(0, 1, 28 * 28, dtype=np.float32).reshape(28, 28)
    write_idx(tmp_path / "i.idx", images)
    if compressed:
        (tmp_path / "i.idx").write_bytes(gzip.compress((tmp_path / "i.idx").read_bytes(), compresslevel=1))
    out, peak = _peak_of(lambda: read_idx(tmp_path / "i.idx"))
    assert np.array_equal(out, images) and out.dtype == np.dtype("float32") and out.flags.writeable
    assert peak <= 1.02 * images.nbytes + 4 * MB, f"peak {peak / MB:.1f} MB for {images.nbytes / MB:.1f} MB"
    # a header declaring more than the file holds: refused before the array is allocated
    header = bytes([0, 0, 0x0D, 2]) + np.asarray([10**6, 10**5], ">u4").tobytes()
    (tmp_path / "lie.idx").write_bytes(header + b"\0" * 64)
    with pytest.raises(DataError, match=r"lie.idx: IDX payload truncated: .* need 400000000000 bytes, found 64"):
        _peak_of(lambda: read_idx(tmp_path / "lie.idx"))


def test_a_fortran_order_member_reads_right_and_counts_its_row_order_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = np.asfortranarray(np.arange(1_000 * 250, dtype=np.float64).reshape(1_000, 250))  # 1 MB as float32
    y = np.arange(1_000) % 10
    np.savez(tmp_path / "f.npz", x=x, y=y, x_test=x[:10], y_test=y[:10])
    data = load_user_dataset("f.npz", base_dir=tmp_path)
    assert np.array_equal(data.train_x.numpy(), x.astype(np.float32)) and data.train_x.is_contiguous()
    assert np.array_equal(data.test_x.numpy(), x[:10].astype(np.float32))
    # x's row-order copy is held with the array read: 2 MB at the peak, for 1 MB once loaded
    monkeypatch.setenv("NETFL_DATA_BUDGET", "1.9MB")
    with pytest.raises(DataError, match=r"f.npz: its arrays take 1.02 MB once loaded and 2.02 MB while they load"):
        load_user_dataset("f.npz", base_dir=tmp_path)
