"""`netfl report`: cases, seeds and targets computed by hand on run folders written here; errors as one
message; a real two-run study end to end; the page rendered in headless Chromium."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from chromium_support import dom_of, needs_chromium, screenshot
from cli_support import assert_user_error, run
from matplotlib.axes import Axes

import netfl
from netfl.results import report_plots
from netfl.results.report_load import Run
from netfl.results.report_tables import mean_curve

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# (sim_time_s, round, test_accuracy, energy_j) per seed
FEDAVG = {
    1: [(0, 0, 0.10, 0), (10, 5, 0.60, 50), (20, 10, 0.75, 100), (30, 15, 0.82, 150)],
    2: [(0, 0, 0.10, 0), (12, 5, 0.72, 40), (24, 10, 0.79, 80), (36, 15, 0.80, 120)],
    3: [(0, 0, 0.10, 0), (8, 5, 0.55, 30), (16, 10, 0.65, 60), (24, 15, 0.69, 90)],
}
MIFA = {
    1: [(0, 0, 0.10), (15, 5, 0.71), (30, 10, 0.81)],
    2: [(0, 0, 0.10), (15, 5, 0.69), (30, 10, 0.78)],
}  # metrics without energy_j (older runs)


def write_run(
    folder: Path,
    rows: list[tuple],
    *,
    seed: int,
    case: str | None = None,
    complete: bool = True,
    received: int = 40,
    dropped: int = 0,
    bytes_up: float = 1e6,
    delivered: tuple[int, ...] = (3, 5),
    staleness: dict[str, int] | None = None,
) -> Path:
    """A run folder as netfl simulate writes it, with the numbers given (energy_j when rows have 4 fields)."""
    folder.mkdir(parents=True)
    metrics = pd.DataFrame([row[:3] for row in rows], columns=["sim_time_s", "round", "test_accuracy"])
    metrics.insert(3, "test_loss", 1.0)
    metrics.insert(4, "participants", 4)
    if len(rows[0]) == 4:
        metrics["energy_j"] = [row[3] for row in rows]
        metrics["work_energy_j"] = [row[3] / 10 for row in rows]  # training and radio: a tenth, idle the rest
    metrics["class_0_accuracy"] = 0.5
    metrics.to_csv(folder / "metrics.csv", index=False, float_format="%.6f")
    summary = {
        "scenario": "hand",
        "seed": seed,
        "algorithm": "fedavg",
        "rounds": rows[-1][1],
        "final_test_accuracy": rows[-1][2],
        "best_test_accuracy": max(r[2] for r in rows),
        "sim_time_s": rows[-1][0],
        "energy_j": 10.0 * seed,
        "updates_received": received,
        "updates_applied": received,
        "updates_dropped": dropped,
        "bytes_up": bytes_up,
        "bytes_down": 2 * bytes_up,
        "complete": complete,
        "staleness": {"mean": 0.0, "max": 0, "histogram": staleness or {"0": received}},
    }
    if case is not None:
        summary["study"] = {"case": case, "seed": seed, "overrides": {"server.algorithm.name": case}}
    (folder / "summary.json").write_text(json.dumps(summary))
    pd.DataFrame(
        {
            "device": range(len(delivered)),
            "group": "phones",
            "tasks_started": [d + 1 for d in delivered],
            "updates_delivered": list(delivered),
            "online_fraction": np.linspace(0.2, 0.9, len(delivered)),
            "energy_j": 1.0,
        }
    ).to_parquet(folder / "devices.parquet")
    return folder


@pytest.fixture
def study(tmp_path: Path) -> Path:
    """fedavg: 3 seeds, with energy; mifa: 2 seeds, no energy_j, seed 2 interrupted, stale updates;
    'baseline': a plain run (no study key), nested deeper."""
    root = tmp_path / "study"
    for seed, rows in FEDAVG.items():
        write_run(
            root / "fedavg" / f"seed{seed}",
            rows,
            seed=seed,
            case="fedavg",
            received=36 + 4 * seed,
            dropped=[2, 0, 4][seed - 1],
            bytes_up=1e6 * seed,
            delivered=(seed, 10),
        )
    write_run(root / "mifa" / "a", MIFA[1], seed=1, case="mifa", staleness={"0": 5, "1": 3, "2": 1})
    write_run(root / "mifa" / "b", MIFA[2], seed=2, case="mifa", complete=False, staleness={"0": 6, "3": 2})
    write_run(root / "extra" / "deeper" / "baseline", [(0, 0, 0.1, 0), (40, 5, 0.9, 70)], seed=7)
    (root / ".hidden.partial-1").mkdir()  # a staging folder of a run being written: not a run
    (root / ".hidden.partial-1" / "summary.json").write_text("{")
    return root


def report(*args) -> tuple:
    result = run("report", *args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def test_time_rounds_and_energy_to_target_per_run(study: Path) -> None:
    report(study, "--target", "0.7", "--target", "0.8")
    runs = pd.read_csv(study / "report" / "run_summary.csv").set_index(["case", "seed"])
    fedavg1, fedavg2, fedavg3 = (runs.loc[("fedavg", s)] for s in (1, 2, 3))
    assert (fedavg1["time_to_0.7_s"], fedavg1["rounds_to_0.7"], fedavg1["energy_to_0.7_j"]) == (20, 10, 100)
    assert fedavg1["work_energy_to_0.7_j"] == 10
    assert (fedavg2["time_to_0.7_s"], fedavg2["rounds_to_0.7"], fedavg2["energy_to_0.7_j"]) == (12, 5, 40)
    assert (fedavg2["time_to_0.8_s"], fedavg2["energy_to_0.8_j"]) == (36, 120)  # 0.80 >= 0.8: reached
    assert (
        not fedavg3["reached_0.7"] and math.isnan(fedavg3["time_to_0.7_s"]) and math.isnan(fedavg3["energy_to_0.7_j"])
    )
    mifa1 = runs.loc[("mifa", 1)]
    assert mifa1["time_to_0.7_s"] == 15 and math.isnan(mifa1["energy_to_0.7_j"])  # no energy_j column: never invented
    assert list(runs["updates_sent"]) == [8, 11, 12, 13, 8, 8]  # devices.parquet's updates_delivered, summed
    assert list(runs["complete"]) == [True, True, True, True, True, False]


def test_cases_mean_std_and_reached_counts(study: Path) -> None:
    report(study, "--target", "0.7", "--target", "0.8")
    cases = pd.read_parquet(study / "report" / "cases.parquet").set_index("case")
    assert list(cases.index) == ["baseline", "fedavg", "mifa"]
    fedavg, mifa, baseline = cases.loc["fedavg"], cases.loc["mifa"], cases.loc["baseline"]
    assert (fedavg["seeds"], mifa["seeds"], mifa["incomplete"], fedavg["incomplete"]) == (3, 2, 1, 0)
    # final accuracy 0.82, 0.80, 0.69: mean 0.77; squared deviations .0025 + .0009 + .0064 over 2 -> std 0.07
    assert fedavg["final_test_accuracy_mean"] == pytest.approx(0.77)
    assert fedavg["final_test_accuracy_std"] == pytest.approx(0.07)
    # 0.7 reached by seeds 1 (20 s, 100 J) and 2 (12 s, 40 J): mean 16, std sqrt(4² + 4²) = sqrt(32)
    assert fedavg["reached_0.7"] == 2
    assert fedavg["time_to_0.7_s_mean"] == pytest.approx(16) and fedavg["time_to_0.7_s_std"] == pytest.approx(32**0.5)
    assert fedavg["energy_to_0.7_j_mean"] == pytest.approx(70)
    assert fedavg["energy_to_0.7_j_std"] == pytest.approx(1800**0.5)
    assert fedavg["work_energy_to_0.7_j_mean"] == pytest.approx(7)  # 10 J and 4 J
    assert fedavg["work_energy_to_0.7_j_std"] == pytest.approx(18**0.5)
    assert fedavg["rounds_to_0.7_mean"] == pytest.approx(7.5)
    # 0.8: seeds 1 (30 s) and 2 (36 s)
    assert (fedavg["reached_0.8"], fedavg["time_to_0.8_s_mean"]) == (2, pytest.approx(33))
    assert fedavg["time_to_0.8_s_std"] == pytest.approx(18**0.5)
    # updates: received 40, 44, 48; dropped 2, 0, 4; bytes up 1, 2, 3 MB
    assert (fedavg["updates_received_mean"], fedavg["updates_received_std"]) == (44, 4)
    assert (fedavg["updates_dropped_mean"], fedavg["updates_dropped_std"]) == (2, 2)
    assert (fedavg["bytes_up_mean"], fedavg["bytes_up_std"]) == (2e6, 1e6)
    assert (fedavg["updates_sent_mean"], fedavg["updates_sent_std"]) == (12, 1)
    # mifa: 0.7 at 15 s and 30 s; 0.8 by one seed only -> no spread; no energy recorded -> NaN, not a guess
    assert (mifa["reached_0.7"], mifa["time_to_0.7_s_mean"]) == (2, 22.5)
    assert mifa["time_to_0.7_s_std"] == pytest.approx(112.5**0.5)
    assert (mifa["reached_0.8"], mifa["time_to_0.8_s_mean"]) == (1, 30) and math.isnan(mifa["time_to_0.8_s_std"])
    assert math.isnan(mifa["energy_to_0.7_j_mean"])
    # one seed: its value, std NaN (ddof=1)
    assert baseline["final_test_accuracy_mean"] == 0.9 and math.isnan(baseline["final_test_accuracy_std"])
    assert baseline["energy_to_0.7_j_mean"] == 70


def test_tidy_runs_table_has_every_evaluation(study: Path) -> None:
    report(study, "--target", "0.7")
    tidy = pd.read_parquet(study / "report" / "runs.parquet")
    assert list(tidy.columns) == [
        "case",
        "seed",
        "run",
        "complete",
        "sim_time_s",
        "round",
        "test_accuracy",
        "test_loss",
        "participants",
        "energy_j",
        "work_energy_j",
    ]
    assert len(tidy) == 4 * 3 + 3 * 2 + 2
    mifa2 = tidy[(tidy["case"] == "mifa") & (tidy["seed"] == 2)]
    assert list(mifa2["test_accuracy"]) == [0.10, 0.69, 0.78] and mifa2["energy_j"].isna().all()
    assert not mifa2["complete"].any() and mifa2["run"].iloc[0] == str(study / "mifa" / "b")
    assert pd.read_csv(study / "report" / "runs.csv").shape == tidy.shape


def test_mean_curve_holds_each_value_until_the_next_evaluation() -> None:
    curves = [
        (np.array([0, 10, 20, 30]), np.array([0.1, 0.6, 0.75, 0.82])),
        (np.array([0, 12, 24, 36]), np.array([0.1, 0.72, 0.79, 0.80])),
        (np.array([0, 8, 16, 24]), np.array([0.1, 0.55, 0.65, 0.69])),
    ]
    grid, mean, low, high = mean_curve(curves)
    assert list(grid) == [0, 8, 10, 12, 16, 20, 24]  # union of times, up to the earliest last evaluation
    at = dict(zip(grid, zip(mean, low, high)))
    assert at[10] == pytest.approx(((0.6 + 0.1 + 0.55) / 3, 0.1, 0.6))
    assert at[24] == pytest.approx(((0.75 + 0.79 + 0.69) / 3, 0.69, 0.79))


def test_the_report_page_names_targets_first_cases_and_flags(study: Path) -> None:
    result = report(study, "--target", "0.7", "--target", "0.8")
    first = result.stdout.splitlines()[0]
    assert first == f"6 run(s) in 3 case(s), 1 incomplete (flagged): {study / 'report' / 'report.html'}"
    page = (study / "report" / "report.html").read_text()
    text = re.sub(r"<[^>]+>", "", page)
    # every mifa seed reached 70 %, and the baseline's one seed (7) is none of mifa's: no paired comparison, so
    # neither is first; fedavg reached it in 2 of 3 seeds only (faster, but that mean is over the lucky seeds)
    assert (
        "accuracy ≥ 70 %: No case is first: mifa at 22.5 ± 10.6 s (2/2 seeds); not compared with it: baseline "
        "(no seed in common). In some seeds only: fedavg at 16.0 ± 5.7 s (2/3 seeds)." in text
    )
    assert "accuracy ≥ 80 %: First baseline at 40 s (1/1 seeds)." in text
    assert "the runs evaluated every 12 s (median; from 8 s to 40 s)" in text  # the resolution of a time to target
    assert "not drawn: baseline, fedavg, whose updates were all fresh" in text  # staleness: mifa's panel only
    assert "Energy to target not recorded for 2 of 6 run(s)" in text
    assert "1 run(s) stopped before the end" in text and "NO (interrupted)" in text
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert page.count('src="data:image/png;base64,') == 5
    written = {p.name for p in (study / "report").iterdir()}
    assert {
        "accuracy_vs_time.png",
        "time_to_target.png",
        "energy_to_target.png",
        "participation.png",
        "staleness.png",
    } <= written  # mifa's updates were stale
    assert all((study / "report" / f).read_bytes().startswith(PNG_MAGIC) for f in written if f.endswith(".png"))


def test_a_second_report_replaces_the_first_and_never_reads_it(study: Path) -> None:
    report(study, "--target", "0.7")
    (study / "report" / "summary.json").write_text("{")  # would be a corrupt run if the report folder were read
    report(study, "--target", "0.7")  # replaced as a whole: the stray file is gone
    assert not (study / "report" / "summary.json").exists()
    assert len(pd.read_csv(study / "report" / "run_summary.csv")) == 6


def test_several_folders_and_plain_runs_sharing_a_name(tmp_path: Path) -> None:
    write_run(tmp_path / "a" / "run", FEDAVG[1], seed=1)
    write_run(tmp_path / "b" / "run", FEDAVG[2], seed=1)
    write_run(tmp_path / "c" / "other", FEDAVG[3], seed=5)
    report(tmp_path / "a", tmp_path / "b", tmp_path / "c" / "other", "--out", tmp_path / "out", "--target", "0.7")
    runs = pd.read_csv(tmp_path / "out" / "run_summary.csv")
    assert list(runs["case"]) == ["a/run", "b/run", "other"] and list(runs["seed"]) == [1, 1, 5]


def test_default_target_is_the_best_accuracy_every_run_reached(study: Path) -> None:
    report(study)
    cases = pd.read_csv(study / "report" / "cases.csv").set_index("case")
    assert [c for c in cases.columns if c.startswith("reached_")] == ["reached_0.69"]  # fedavg seed 3's best
    assert list(cases["reached_0.69"]) == [1, 3, 2]
    assert "(default: the best accuracy every run reached" in (study / "report" / "report.html").read_text()


# ------------------------------------------------------------------------------ errors


def test_a_folder_without_runs(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert_user_error(run("report", tmp_path / "empty"), "no run folders found")
    assert_user_error(run("report", tmp_path / "missing"), "missing: no such folder")


@pytest.mark.parametrize(
    "file, content, expected",
    [
        ("summary.json", '{"rounds": 3,', "not valid JSON"),
        ("summary.json", "[1, 2]", "not a JSON object"),
        ("summary.json", json.dumps({"seed": 1, "rounds": "many"}), "rounds: 'many' is not a number"),
        ("summary.json", json.dumps({"seed": 1, "study": {"seed": 2}}), "study.case: None is not a case name"),
        ("metrics.csv", "sim_time_s,round\n0,0\n", "test_accuracy: no such column"),
        ("metrics.csv", "sim_time_s,round,test_accuracy\n0,0,0.1\n5,1,oops\n", "row 3, column test_accuracy: 'oops'"),
        ("metrics.csv", "sim_time_s,round,test_accuracy\n5,0,0.1\n1,1,0.2\n", "row 3, column sim_time_s: goes back"),
        ("metrics.csv", "", "cannot be read as CSV"),
        ("devices.parquet", "not parquet", "cannot be read as Parquet"),
    ],
)
def test_a_damaged_file_is_one_message_naming_it(tmp_path: Path, file: str, content: str, expected: str) -> None:
    folder = write_run(tmp_path / "runs" / "r", FEDAVG[1], seed=1)
    (folder / file).write_text(content)
    result = run("report", tmp_path / "runs")
    assert_user_error(result, f"{folder / file}: 1 problem(s)", expected)
    assert len(result.stderr.strip().splitlines()) == 2  # as for a topology: the file, then the field
    assert not (tmp_path / "runs" / "report").exists()


def test_bad_target_and_an_out_folder_of_other_files(study: Path) -> None:
    assert_user_error(
        run("report", study, "--target", "70"), "--target 70: a target is a test accuracy between 0 and 1"
    )
    (study / "notes").mkdir()
    (study / "notes" / "thesis.tex").write_text("keep me")
    assert_user_error(run("report", study, "--out", study / "notes"), "not a netfl report")
    assert (study / "notes" / "thesis.tex").read_text() == "keep me"


# ------------------------------------------------------------------------------ the verdict in the terminal


def _page(folder: Path) -> tuple[list[str], list[list[str]]]:
    """report.html's per-target sentences and its paired comparisons table's rows, as text."""
    page = (folder / "report.html").read_text()

    def text(fragment: str) -> str:
        return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()

    sentences = [text(li) for li in re.findall(r"<li>(.*?)</li>", page, re.S)]
    table = page.split("<h2>Paired comparisons</h2>", 1)[1].split("</table>", 1)[0]
    rows = [
        [text(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r, re.S)]
        for r in re.findall(r"<tr.*?</tr>", table, re.S)
    ]
    return sentences, rows


def _printed(stdout: str) -> tuple[list[str], list[list[str]]]:
    """The terminal's per-target sentences and its table's rows (columns two spaces or more apart)."""
    lines = stdout.splitlines()
    sentences = [line.strip() for line in lines if line.startswith("  accuracy ≥ ")]
    start = next(i for i, line in enumerate(lines) if line.startswith("Paired comparisons: "))
    return sentences, [re.split(r"\s{2,}", line.strip()) for line in lines[start + 1 :] if line.strip()]


@pytest.mark.parametrize("interpolate", [False, True], ids=["widened", "interpolated"])
def test_the_terminal_prints_the_pages_verdict(study: Path, tmp_path: Path, interpolate: bool) -> None:
    studies = {"hand": study, "lead": lead_study(tmp_path / "lead")}
    for name, folder in studies.items():
        args = ["--target", "0.7", "--target", "80%"] + (["--interpolate"] if interpolate else [])
        result = report(folder, *args)
        sentences, rows = _printed(result.stdout)
        assert (sentences, rows) == _page(folder / "report"), name
        assert len(sentences) == 2 and len(rows) > 1  # the header and at least one comparison
        assert result.stdout.splitlines()[0].endswith(f"{folder / 'report' / 'report.html'}")
    lead = report(studies["lead"], "--target", "0.7").stdout
    assert (
        "  accuracy ≥ 70 %: No case is first: early at 15 ± 0 s (3/3 seeds); tied with it: late +15.0 [0, +30.0] s."
        in lead
    )
    assert re.search(
        r"\n  ≥ 70 %  late  early  +3  +\+15\.0 \[0, \+30\.0\]: tie  +\+3\.00 \[0, \+6\.00\]: tie  +−5\.00", lead
    )
    assert "[95 % paired t interval, widened by the evaluation interval]" in lead


def test_the_json_verdict_holds_paired_csvs_numbers(study: Path, tmp_path: Path) -> None:
    lead = lead_study(tmp_path / "lead")
    for folder in (study, lead):
        result = report(folder, "--target", "0.7", "--target", "0.8", "--format", "json")
        verdict = json.loads(result.stdout)  # nothing but the JSON on stdout
        assert verdict["report"] == str(folder / "report" / "report.html")
        paired = pd.read_csv(folder / "report" / "paired.csv")
        cases = pd.read_csv(folder / "report" / "cases.csv").set_index("case")
        assert [t["target"] for t in verdict["targets"]] == [0.7, 0.8]
        checked = 0
        for target in verdict["targets"]:
            for row in target["comparisons"]:
                for measure in ("time_to_target_s", "work_energy_to_target_j", "final_test_accuracy"):
                    same = paired[(paired.measure == measure)]
                    same = (
                        same[same.target.isna()]
                        if measure == "final_test_accuracy"
                        else same[same.target == target["target"]]
                    )
                    stored = same[(same.case == row["case"]) & (same.reference == row["against"])]
                    sign = 1
                    if stored.empty:  # stored once per pair, maybe the other way round
                        stored, sign = same[(same.case == row["against"]) & (same.reference == row["case"])], -1
                    (expected,) = stored.to_dict("records")
                    got = row[measure]
                    assert got["seeds"] == expected["seeds"] and got["verdict"] in (
                        expected["verdict"],
                        {"lower": "higher", "higher": "lower"}.get(expected["verdict"]),
                    )
                    for key, other in (
                        ("difference", "difference"),
                        ("low", "high" if sign < 0 else "low"),
                        ("high", "low" if sign < 0 else "high"),
                    ):
                        if math.isnan(expected[other]):
                            assert got[key] is None
                        else:
                            assert got[key] == pytest.approx(sign * expected[other])
                    checked += 1
            for entry in target["reached_in_every_seed"] + target["reached_in_some_seeds_only"]:
                t = f"{target['target']:g}"
                assert entry["seeds_reached"] == cases.loc[entry["case"], f"reached_{t}"]
                assert entry["time_to_target_s"]["mean"] == pytest.approx(
                    cases.loc[entry["case"], f"time_to_{t}_s_mean"]
                )
        assert checked > 0
    by_target = {t["target"]: t for t in verdict["targets"]}  # the lead study: early and late tied at 70 %
    tie = by_target[0.7]
    assert (tie["first"], tie["fastest_by_mean_time"]) == (None, "early")
    assert tie["tied"] == [{"case": "late", "seeds": 3, "difference": 15.0, "low": 0.0, "high": 30.0, "verdict": "tie"}]
    assert by_target[0.8]["never"] == ["late"] and by_target[0.8]["first"] == "early"
    assert verdict["widened_by_evaluation_interval"] is True and "Student's t" in verdict["method"]


def test_the_command_line_takes_a_target_as_a_percentage(tmp_path: Path) -> None:
    from test_report import lead_study

    study = lead_study(tmp_path / "study")
    assert run("report", study, "--target", "70%", "--out", tmp_path / "a").exit_code == 0
    assert run("report", study, "--target", "0.7", "--out", tmp_path / "b").exit_code == 0
    assert (tmp_path / "a" / "paired.csv").read_bytes() == (tmp_path / "b" / "paired.csv").read_bytes()
    assert_user_error(
        run("report", study, "--target", "70"),
        "--target 70: a target is a test accuracy between 0 "
        "and 1, e.g. --target 0.8 or --target 80%; for 70 % write --target 70%",
    )
    for bad, said in (("150%", "150% is not between 0% and 100%"), ("most", "'most' is not a fraction")):
        result = run("report", study, "--target", bad)
        assert result.exit_code == 2 and said in result.output and "Traceback" not in result.output


# ------------------------------------------------------------------------------ real runs, rendered


@pytest.mark.slow
def test_two_real_runs_end_to_end(tmp_path: Path) -> None:
    scenario = yaml.safe_load((REPO / "topologies" / "quickstart.yaml").read_text())
    scenario["stop"] = {"rounds": 10}
    outcomes = [
        netfl.run(netfl.from_dict(scenario), seed=seed, out=tmp_path / "study" / f"seed{seed}") for seed in (1, 2)
    ]
    result = report(tmp_path / "study", "--target", "0.5")
    assert result.stdout.startswith("2 run(s) in 1 case(s):")  # one scenario, two seeds: one case, its name's
    summary = pd.read_csv(tmp_path / "study" / "report" / "run_summary.csv").set_index("seed")
    assert set(summary["case"]) == {"quickstart"}
    tidy = pd.read_csv(tmp_path / "study" / "report" / "runs.csv")
    for seed, outcome in zip((1, 2), outcomes):
        row, metrics = summary.loc[seed], outcome.metrics
        assert row["final_test_accuracy"] == outcome.summary["final_test_accuracy"]
        assert row["updates_sent"] == outcome.devices["updates_delivered"].sum()
        first = metrics[metrics["test_accuracy"] >= 0.5].iloc[0]
        assert row["time_to_0.5_s"] == pytest.approx(first["sim_time_s"], abs=1e-6)
        # energy to target: metrics.csv's cumulative energy_j at that evaluation, recorded by the run itself
        assert first["energy_j"] > 0 and row["energy_to_0.5_j"] == pytest.approx(first["energy_j"], abs=1e-6)
        assert len(tidy[tidy["seed"] == seed]) == len(metrics)
    assert not (tmp_path / "study" / "report" / "staleness.png").exists()  # synchronous: nothing stale
    assert (tmp_path / "study" / "report" / "energy_to_target.png").exists()
    for figure in ("world_over_time.png", "device_timeline.png"):  # from the runs' timeline and events
        assert (tmp_path / "study" / "report" / figure).read_bytes().startswith(PNG_MAGIC)
    assert "Energy to target not recorded" not in (tmp_path / "study" / "report" / "report.html").read_text()


@needs_chromium
@pytest.mark.slow
def test_the_page_renders_in_headless_chromium(study: Path, tmp_path: Path) -> None:
    report(study, "--target", "0.7", "--target", "0.8")
    page = study / "report" / "report.html"
    # A copy with a probe that records, once loaded, each image's decoded size: a broken data URI has width 0.
    probe = tmp_path / "probe.html"
    probe.write_text(
        page.read_text().replace(
            "</body>",
            (
                "<script>window.addEventListener('load', () => document.body.setAttribute('data-images', "
                "JSON.stringify([...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight]))));"
                "</script></body>"
            ),
        )
    )
    dom = dom_of(probe)
    images = json.loads(re.search(r'data-images="([^"]*)"', dom).group(1).replace("&quot;", '"'))
    assert len(images) == 5 and all(done and width > 400 and height > 200 for done, width, height in images)
    assert len(re.findall(r'<img alt="[^"]+" src="data:image/png;base64,', dom)) == 5
    assert dom.count('<table class="dataframe data') == 5 and "<td>fedavg</td>" in dom  # paired comparisons too
    pixels = screenshot(page, tmp_path / "page.png", 1200, 3000)
    assert pixels.shape[:2] == (3000, 1200)
    # the plots' case colours (tab10 blue and orange, nowhere in the page's own grey-and-amber style) are on screen
    for colour in ((0.122, 0.467, 0.706), (1.0, 0.498, 0.055)):
        assert (np.abs(pixels - colour).max(axis=2) < 0.02).sum() > 500, colour


# ------------------------------------------------------------------------------ paired comparisons


def test_a_paired_t_interval_on_three_hand_computed_seeds() -> None:
    from netfl.results.paired import paired_interval

    # differences -0.5, -1.0, -1.5: mean -1, sample sd 0.5, se 0.5/sqrt(3); t(0.975, 2 df) = 4.302653
    wide = paired_interval([-0.5, -1.0, -1.5])
    assert (wide.n, wide.mean) == (3, -1.0)
    assert (wide.low, wide.high) == pytest.approx((-1 - 4.302653 * 0.5 / 3**0.5, -1 + 4.302653 * 0.5 / 3**0.5))
    assert wide.verdict == "tie"  # [-2.24, +0.24] holds 0
    narrow = paired_interval([-1.0, -1.2, -0.8])  # sd 0.2: [-1.497, -0.503]
    assert (narrow.low, narrow.high) == pytest.approx((-1.4968275, -0.5031725)) and narrow.verdict == "lower"
    assert narrow.flipped().verdict == "higher" and narrow.flipped().low == pytest.approx(0.5031725)
    # widened by the evaluation brackets (0.2 below, 0.6 above): [-1.697, +0.097] holds 0 -- a tie
    assert paired_interval([-1.0, -1.2, -0.8], widen=(0.2, 0.6)).verdict == "tie"
    assert paired_interval([2.0]).verdict == "one seed" and paired_interval([]).verdict == "no seed in common"


def test_cases_are_paired_by_seed_and_widened_by_their_brackets() -> None:
    from netfl.results.paired import compare

    summary = pd.DataFrame(
        {
            "case": ["a"] * 4 + ["b"] * 3,
            "seed": [1, 2, 3, 4, 1, 2, 3],
            "time": [10.0, 12.0, 11.0, 99.0, 20.0, 23.0, 21.0],  # seed 4: a's alone, not paired
            "gap": [2.0, 2.0, 5.0, 9.0, 1.0, 1.0, 4.0],
        }
    )
    p = compare(summary, "b", "a", "time", "gap")  # b - a per seed: 10, 11, 10
    assert p.n == 3 and p.mean == pytest.approx(31 / 3) and p.widened == (2.0, 3.0)
    half = 4.302653 * (1 / 3) ** 0.5 / 3**0.5  # sd of (10, 11, 10) is 1/sqrt(3)
    assert (p.low, p.high) == pytest.approx((31 / 3 - half - 2.0, 31 / 3 + half + 3.0), rel=1e-6)
    assert p.verdict == "higher"


# Three seeds of two cases evaluated every 15 s; "late" reaches 70 % one evaluation after "early" in every seed.
EARLY = {s: [(0, 0, 0.10, 0), (15, 5, a, 30), (30, 10, 0.80, 60)] for s, a in ((1, 0.75), (2, 0.78), (3, 0.72))}
LATE = {s: [(0, 0, 0.10, 0), (15, 5, a, 30), (30, 10, 0.75, 60)] for s, a in ((1, 0.65), (2, 0.66), (3, 0.64))}


def lead_study(root: Path) -> Path:
    for case, runs in (("early", EARLY), ("late", LATE)):
        for seed, rows in runs.items():
            write_run(root / case / f"seed{seed}", rows, seed=seed, case=case)
    return root


def test_a_lead_of_one_evaluation_is_a_tie_not_a_first(tmp_path: Path) -> None:
    study = lead_study(tmp_path / "study")
    report(study, "--target", "0.7")
    text = re.sub(r"<[^>]+>", "", (study / "report" / "report.html").read_text())
    # late - early = 15 s in every seed (sd 0), widened by the 15 s before each's hit: [0, +30] holds 0
    assert "No case is first: early at 15 ± 0 s (3/3 seeds); tied with it: late +15.0 [0, +30.0] s." in text
    assert "the runs evaluated every 15 s." in text and "A case is named first only where" in text
    paired = pd.read_csv(study / "report" / "paired.csv")
    row = paired[(paired.measure == "time_to_target_s") & (paired.case == "late")].iloc[0]
    assert (row.reference, row.seeds, row.difference, row.low, row.high) == ("early", 3, 15, 0, 30)
    assert (row.widened_low, row.widened_high, row.verdict) == (15, 15, "tie") and "Student's t" in row.method
    accuracy = paired[paired.measure == "final_test_accuracy"].iloc[0]  # 0.75 - 0.80 in every seed: certain
    assert accuracy.difference == pytest.approx(-0.05) and accuracy.verdict == "lower"


def test_interpolating_between_evaluations_is_asked_for_and_said(tmp_path: Path) -> None:
    study = lead_study(tmp_path / "study")
    report(study, "--target", "0.7", "--interpolate")
    runs = pd.read_csv(study / "report" / "run_summary.csv").set_index(["case", "seed"])
    # early seed 1: 0.10 at 0 s, 0.75 at 15 s: the line crosses 0.7 at 15 * 0.6 / 0.65 s; late seed 1: 0.65 at
    # 15 s, 0.75 at 30 s: at 15 + 15 * 0.05 / 0.10 = 22.5 s; energies alike (30 J per 15 s)
    assert runs.loc[("early", 1), "time_to_0.7_s"] == pytest.approx(15 * 0.6 / 0.65)
    assert runs.loc[("late", 1), "time_to_0.7_s"] == pytest.approx(22.5)
    assert runs.loc[("late", 1), "energy_to_0.7_j"] == pytest.approx(45) and runs.loc[
        ("late", 1), "rounds_to_0.7"
    ] == pytest.approx(7.5)
    assert runs.loc[("late", 1), "time_to_0.7_gap_s"] == 15  # the bracket, still recorded
    text = re.sub(r"<[^>]+>", "", (study / "report" / "report.html").read_text())
    assert "interpolated between evaluations (--interpolate)" in text and "are interpolated: where" in text
    assert "accuracy ≥ 70 %: First early at" in text and "Later than early: late +" in text


def test_legends_count_devices_and_seeds() -> None:
    from netfl.results.report_load import Run
    from netfl.results.report_plots import seeds_label

    devices = pd.DataFrame({"group": ["phones"] * 100})
    runs = [Run(Path("x"), {}, pd.DataFrame(), devices) for _ in range(3)]
    assert seeds_label("fedavg", runs) == "fedavg (100 devices × 3 seeds)"
    assert seeds_label("one", runs[:1]) == "one (100 devices × 1 seed)"


def test_a_day_folds_by_hour() -> None:
    from netfl.results.report_world import _by_hour

    hourly = _by_hour(np.array([0.0, 1800.0, 3600.0, 86400 + 1800.0]), np.array([1.0, 3.0, 5.0, 7.0]))
    assert hourly[0] == pytest.approx(11 / 3) and hourly[1] == 5.0 and np.isnan(hourly[2:]).all()


def test_readings_of_one_instant_are_merged() -> None:
    """The grid's evaluation and the final one at the stop share an instant: states as the last reads them, what
    happened since summed."""
    from netfl.results.world_plots import one_per_instant

    rows = pd.DataFrame({"sim_time_s": [0.0, 10.0, 10.0], "group": "g", "online": [3, 4, 6], "participated": [0, 5, 2]})
    merged = one_per_instant(rows)
    assert merged.to_dict("list") == {"sim_time_s": [0.0, 10.0], "online": [3, 6], "participated": [0, 7]}


def _runs_with_devices(online: list[float]) -> list[Run]:
    devices = pd.DataFrame({"online_fraction": online, "updates_delivered": [3, 0, 3, 7][: len(online)]})
    return [Run(Path(f"r{seed}"), {}, pd.DataFrame(), devices, case="fedavg", seed=seed) for seed in (1, 2)]


def test_participation_is_a_scatter_against_online_time_where_devices_differ_in_it() -> None:
    png, caption = report_plots.participation(_runs_with_devices([0.2, 0.9, 1.0, 0.5]), ["fedavg"], {"fedavg": "C0"})
    assert png.startswith(PNG_MAGIC) and "one dot per device and seed" in caption


def test_participation_counts_updates_where_every_device_was_online_the_whole_run(monkeypatch) -> None:
    """All at 100 %: a scatter would be one vertical line (docs/studies/slow-uplink); a histogram of updates instead,
    its bars the devices of every seed that delivered each number of updates."""
    bars = {}
    monkeypatch.setattr(Axes, "hist", lambda self, x, bins, **kw: bars.update(x=list(x), bins=list(bins)))
    png, caption = report_plots.participation(_runs_with_devices([1.0] * 4), ["fedavg"], {"fedavg": "C0"})
    assert png.startswith(PNG_MAGIC) and "online 100 % of its run, so online time tells none apart" in caption
    assert sorted(bars["x"]) == [0, 0, 3, 3, 3, 3, 7, 7] and bars["bins"] == [k - 0.5 for k in range(9)]
