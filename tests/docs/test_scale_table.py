"""The Scale page's table is the one benchmarks/scale_table.py writes from the recorded runs (no drift)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def scale_table():
    spec = importlib.util.spec_from_file_location("scale_table", REPO / "benchmarks" / "scale_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_scale_page_holds_the_table_of_the_recorded_runs() -> None:
    assert scale_table().render(check=True) == 0


def test_a_recorded_run_changes_the_table(tmp_path: Path, monkeypatch) -> None:
    """The check can fail: a run recorded and merged gives another table (in a copy of the page)."""
    module = scale_table()
    page = tmp_path / "scale.md"
    page.write_text(f"# Scale\n\n{module.BEGIN}\n{module.END}\n")
    monkeypatch.setattr(module, "PAGE", page)
    monkeypatch.setattr(module, "RESULTS", tmp_path)
    assert module.render(check=False) == 0 and module.render(check=True) == 0
    run = {"wall_s": 40.9, "user_s": 38.0, "sys_s": 2.5, "maxrss_mb": 718.0, "rounds": 480, "events": 336_956}
    report = {
        "environment": {"started": "2026-12-02 20:00:00", "netfl": "0.2.0", "cpus": 2},
        "sections": {"engine": {"others_busy_cores": 0.1, "by_world": {"phones": {"10000": run}}}},
    }
    module.merge("phones", report)
    assert json.loads((tmp_path / "scale-phones.json").read_text())["runs"]["10000"]["wall_s"] == 40.9
    assert module.render(check=True) == 1
    module.render(check=False)
    row = next(line for line in page.read_text().splitlines() if "| 10 000 | 40.9 s" in line)
    assert "| 40.5 s | 480 | 336 956 | 718 MB | — | 2026-12-02, others busy 0.1 of 2 cores |" in row
