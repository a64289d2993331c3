"""examples/tutorial.ipynb runs from top to bottom (nbclient, a local kernel, no network), at a small size.

The notebook's sizes cell (tagged ``parameters``) is replaced by smaller sizes, and it runs in a temporary
folder, where it writes its results. It is committed without outputs.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "examples" / "tutorial.ipynb"


def test_the_tutorial_is_committed_without_outputs() -> None:
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = [cell for cell in cells if cell["cell_type"] == "code"]
    assert code and all(not cell["outputs"] and cell["execution_count"] is None for cell in code)
    sizes = [cell for cell in code if "parameters" in cell.get("metadata", {}).get("tags", [])]
    assert len(sizes) == 1 and "ROUNDS = " in "".join(sizes[0]["source"])


@pytest.mark.slow
def test_the_tutorial_runs_at_a_small_size(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    sizes = next(cell for cell in notebook.cells if "parameters" in cell.metadata.get("tags", []))
    sizes.source = "ROUNDS = 4\nSEEDS = 2\n"
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        nbclient.NotebookClient(
            notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        ).execute()
    finally:  # the notebook client installs Ctrl-C's default handler in this process: the worker's is put back
        for s, handler in handlers.items():
            signal.signal(s, handler)
    study = tmp_path / "results" / "tutorial" / "study"
    assert sorted(p.relative_to(study / "runs").as_posix() for p in study.glob("runs/*/seed*")) == [
        "fedau/seed0",
        "fedau/seed1",
        "fedavg/seed0",
        "fedavg/seed1",
    ]
    assert (study / "report" / "report.html").is_file()
    outputs = {i: cell.outputs for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"}
    assert not [o for cells in outputs.values() for o in cells if o.output_type == "error"]
    shown = "".join(
        str(o.get("data", {}).get("text/plain", "")) + o.get("text", "") for c in outputs.values() for o in c
    )
    assert "4 rounds in" in shown  # the single run's summary
    assert "fedau" in shown and "time_to_target_s" in shown  # the paired comparison's table
    images = [o for c in outputs.values() for o in c if "image/png" in o.get("data", {})]
    assert len(images) == 3  # accuracy against time, the world over time, the report's figure
