"""The reproduction figures of docs/reproductions.md cannot drift (examples/reproductions.py).

The page's table is what examples/reproductions.json holds, to the character; and the code still gives the
numbers recorded with those figures: the MIFA toy's rounds to 1e-3 (three of the table's figures themselves)
and each study's canary, one seed of one case for a round or a few. A change that moves a result fails here:
then the full studies are run again and the file and the page regenerated (the module's docstring says how).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from netfl.learn.data.datasets import FASHION_MNIST_DIR

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("reproductions", ROOT / "examples" / "reproductions.py")
reproductions = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(reproductions)
STORED = json.loads((ROOT / "examples" / "reproductions.json").read_text())
AGAIN = "the results moved: run the studies again, then python examples/reproductions.py measure/canaries/readme"
FASHION = {"fedau_participation", "cvar_fashion", "mmfl_sampling"}


def test_the_docs_page_shows_the_figures_of_the_file() -> None:
    assert reproductions.PAGE == ROOT / "docs" / "reproductions.md"
    text = reproductions.PAGE.read_text()
    start, end = reproductions.readme_block(text)
    assert text[start:end] == "\n" + reproductions.render(STORED["figures"]) + "\n", (
        "docs/reproductions.md's table was edited by hand: python examples/reproductions.py readme"
    )
    assert "{" not in reproductions.render(STORED["figures"]).replace("U{1..10}", "")  # every figure filled in


@pytest.mark.slow
def test_the_mifa_toy_reaches_1e3_in_the_rounds_the_table_says() -> None:
    rounds = reproductions.mifa_canary()
    assert rounds == STORED["canaries"]["mifa_quadratic"], AGAIN
    figures = STORED["figures"]["mifa_quadratic"]
    for key in ("rounds_umifam", "rounds_mifa", "rounds_umifa"):  # within the canary's 300 rounds
        assert rounds[key] == figures[key], (key, AGAIN)


@pytest.mark.slow
@pytest.mark.parametrize("study", list(reproductions.CANARIES))
def test_each_study_still_gives_its_canary(study: str) -> None:
    if study in FASHION and not any((FASHION_MNIST_DIR / f"train-images-idx3-ubyte{z}").exists() for z in ("", ".gz")):
        pytest.skip("Fashion-MNIST is not installed (Debian: dataset-fashion-mnist)")
    assert reproductions.canary(study) == STORED["canaries"][study], AGAIN
