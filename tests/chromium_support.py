"""Headless Chromium, as the tests that look at a rendered page use it: the DOM after scripts ran, a screenshot."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

#: Skips a test where Debian's chromium is not installed (CI installs it).
needs_chromium = pytest.mark.skipif(
    shutil.which("chromium") is None,
    reason="chromium is not on PATH (Debian: apt-get install chromium); CI installs it",
)

_CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000"]


def dom_of(page: Path, query: str = "") -> str:
    """The page's DOM once its scripts have run; ``query`` (``q=word``) is its URL's query string."""
    url = page.as_uri() + (f"?{query}" if query else "")
    return subprocess.run(
        [*_CHROMIUM, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True
    ).stdout


def screenshot(page: Path, shot: Path, width: int, height: int) -> np.ndarray:
    """The page drawn ``width`` x ``height`` into ``shot`` (a PNG), read back as RGB values in [0, 1]."""
    subprocess.run(
        [*_CHROMIUM, f"--screenshot={shot}", f"--window-size={width},{height}", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
        cwd=shot.parent,
    )
    from matplotlib.image import imread

    return imread(shot)[:, :, :3]
