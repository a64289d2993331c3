"""The documentation site (mkdocs.yml, docs/) builds in strict mode, offline, and renders in a browser.

Strict: a broken link, a missing page or anchor, an API name mkdocstrings cannot find, or a schema marker that
names no model fails the build. The parameter tables come from netfl.config.schema (docs_build/schema_tables.py),
every row with a description, and are written into the pages' Markdown (readable on a forge or in an editor),
where a test and the site's build both fail when one is out of date with the code. The docstrings' Sphinx
roles become links or code (docs_build/sphinx_roles.py).
Headless Chromium renders the API reference: its text holds the public API's names, and its screenshot is a
page, not a blank.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from chromium_support import dom_of, needs_chromium, screenshot

from netfl.config import schema

REPO = Path(__file__).resolve().parents[2]
MKDOCS = Path(sys.executable).parent / "mkdocs"
SPEC = importlib.util.spec_from_file_location("schema_tables", REPO / "docs_build" / "schema_tables.py")
schema_tables = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(schema_tables)
ROLES_SPEC = importlib.util.spec_from_file_location("sphinx_roles", REPO / "docs_build" / "sphinx_roles.py")
sphinx_roles = importlib.util.module_from_spec(ROLES_SPEC)
ROLES_SPEC.loader.exec_module(sphinx_roles)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    # no network: mkdocs-material's fonts are off (theme.font: false) and nothing else is fetched
    built = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(out)], cwd=REPO, capture_output=True, text=True
    )
    assert built.returncode == 0, built.stderr
    return out


def test_a_table_row_is_the_declaration() -> None:
    rows = schema_tables.table(schema.BatterySpec, "devices[].battery").splitlines()
    assert rows[0] == "| key (`devices[].battery`) | type | default | bounds | description |"
    assert (
        "| `capacity` | energy (J) | `55kJ` | > 0 | energy when full; 55 kJ is a 4000 mAh x 3.85 V phone battery |"
        in rows
    )
    assert (
        "| `min_level` | fraction | `0%` | ≥ 0, ≤ 1 | at or below this fraction the device does not take part |" in rows
    )
    assert len(rows) == 2 + len(schema.BatterySpec.model_fields)
    keys = [r.split(" | ")[0] for r in schema_tables.table(schema.ServerSpec, "server").splitlines()[2:]]
    assert "| `async`" in keys and "| `async_`" not in keys  # the key as the file writes it, not the field async_
    with pytest.raises(ValueError, match="NoSuchSpec"):
        schema_tables.expand("<!-- schema: NoSuchSpec x -->")


def test_every_page_holds_its_tables_as_the_code_declares_them() -> None:
    """The Markdown itself has every table, between its marker lines, equal to what the code declares now."""
    pages = schema_tables.pages(REPO / "docs")
    assert {p.name for p in pages} >= {"scenario.md", "task.md", "devices.md", "server.md", "network.md"}
    markers = blocks = 0
    for page in pages:
        text = page.read_text()
        assert schema_tables.stale(text) == [], f"{page}: run python docs_build/schema_tables.py"
        markers += len(schema_tables.MARKER.findall(text))
        for block in schema_tables.BLOCK.finditer(text):
            blocks += 1
            rows = [line for line in block.group("body").splitlines() if line.startswith("| `")]
            separators = [line for line in block.group("body").splitlines() if line.startswith("| --- |")]
            assert len(rows) >= 1 and len(separators) == 1, block.group(0)[:80]
    assert markers == blocks >= 30
    assert schema_tables.main(["--check", "--docs", str(REPO / "docs")]) == 0


def test_a_table_out_of_date_is_found_and_rewritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (REPO / "docs" / "topology" / "devices.md").read_text()
    row = "| `capacity` | energy (J) | `55kJ` |"
    assert row in text
    behind = text.replace(row, "| `capacity` | energy (J) | `50kJ` |")  # the code changed its default
    assert schema_tables.stale(behind) == ["<!-- schema: BatterySpec devices[].battery -->"]
    with pytest.raises(ValueError, match=r"out of date .*BatterySpec.*python docs_build/schema_tables.py"):
        schema_tables.expand(behind)  # the site's build fails on it too
    assert schema_tables.fill(behind) == text
    bare = "# A page\n\n<!-- schema: StopSpec stop -->\n\ntext\n"  # a new marker, not yet filled
    assert schema_tables.stale(bare) == ["<!-- schema: StopSpec stop -->"]
    filled = schema_tables.fill(bare)
    assert schema_tables.stale(filled) == [] and "| `rounds` |" in filled and filled.endswith("\n\ntext\n")
    site = schema_tables.expand(filled)  # the site: the table, without its marker lines
    assert "<!--" not in site and schema_tables.table(schema.StopSpec, "stop") in site
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.md").write_text(behind)
    assert schema_tables.main(["--check", "--docs", str(docs)]) == 1
    assert "page.md" in capsys.readouterr().err and (docs / "page.md").read_text() == behind
    assert schema_tables.main(["--docs", str(docs)]) == 0
    assert (docs / "page.md").read_text() == text
    assert schema_tables.main(["--check", "--docs", str(docs)]) == 0


def test_every_key_in_a_table_has_a_description() -> None:
    """Every row of every parameter table on the site says what its key is for: no blank description cell."""
    markers = [m for page in (REPO / "docs").rglob("*.md") for m in schema_tables.MARKER.finditer(page.read_text())]
    assert len(markers) > 25
    blank = []
    for marker in markers:
        model = getattr(schema, marker.group(1))
        for row in schema_tables.table(model, marker.group(2)).splitlines()[2:]:
            if row.endswith("|  |"):
                blank.append(f"{marker.group(1)}: {row.split(' | ')[0].lstrip('| ')}")
    assert not blank, f"give these fields a description= in netfl/config/schema/: {blank}"


def test_a_sphinx_role_becomes_an_optional_reference() -> None:
    def resolve(name: str) -> str | None:  # the docstring's module imports Result from netfl.api
        return {"Result": "netfl.api.Result"}.get(name)

    def ref(identifier: str, title: str) -> str:
        return f'<autoref identifier="{identifier}" optional><code>{title}</code></autoref>'

    assert sphinx_roles.convert("a :class:`~netfl.sim.device.Device` here", resolve) == (
        f"a {ref('netfl.sim.device.Device', 'Device')} here"
    )
    assert sphinx_roles.convert(":mod:`netfl.sim`, :py:func:`Result`", resolve) == (
        f"{ref('netfl.sim', 'netfl.sim')}, {ref('netfl.api.Result', 'Result')}"
    )
    assert sphinx_roles.convert(":meth:`the run <Result.run>`", resolve) == ref("Result.run", "the run")
    assert sphinx_roles.convert(":class:`~netfl.policies.base.RoundPolicy`", resolve) == ref(
        "policies.base.RoundPolicy", "RoundPolicy"
    )  # documented from policies/ (docs/api/policies.md)
    assert sphinx_roles.convert(":func:`!gone`", resolve) == "<code>gone</code>"
    assert sphinx_roles.convert("no :role here, `code`", resolve) == "no :role here, `code`"


@pytest.mark.slow
def test_the_site_builds_strict_with_every_page(site: Path) -> None:
    nav = re.findall(r":\s*([\w/.-]+\.md)\s*$", (REPO / "mkdocs.yml").read_text(), re.M)
    pages = {p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")}
    assert set(nav) == pages, "every page in the nav, and every nav entry a page"
    battery = (site / "topology" / "devices" / "index.html").read_text()
    assert "<code>charge_power</code>" in battery and "<!-- schema:" not in battery and "<!-- /schema" not in battery
    policies = (site / "api" / "policies" / "index.html").read_text()
    assert "<code>netfl.policies.base</code>" in policies
    # the docstrings' Sphinx roles: a link where the target is on a page, code where it is not, never raw text
    assert 'href="#policies.base.RoundPolicy"><code>RoundPolicy</code></a>' in policies
    assert (
        '<span title="netfl.ScenarioError"><code>netfl.ScenarioError</code></span>'
        in (site / "api" / "netfl" / "index.html").read_text()
    )
    for page in (site / "api").rglob("*.html"):
        raw = re.findall(r":(?:py:)?(?:class|mod|func|meth|attr|data|exc|obj):(?:<code>|`)", page.read_text())
        assert not raw, (page, raw)
    changelog = (site / "changelog" / "index.html").read_text()
    assert (REPO / "CHANGELOG.md").read_text().splitlines()[0].lstrip("# ") in changelog
    assert "fonts.googleapis.com" not in (site / "index.html").read_text()


@pytest.mark.slow
@needs_chromium
def test_chromium_renders_the_api_reference(site: Path, tmp_path: Path) -> None:
    page = site / "api" / "netfl" / "index.html"
    dom = dom_of(page)
    for name in ("netfl.api.run", "netfl.api.load", "netfl.api.from_dict", "netfl.api.with_own", "Result"):
        assert f'id="{name}"' in dom or name in dom, name
    assert "ScenarioError" in dom and "run_sweep" in dom and "write_report" in dom
    pixels = screenshot(page, tmp_path / "api.png", 1280, 1600)
    assert pixels.shape[:2] == (1600, 1280)
    assert pixels.std() > 0.05  # text and a header on a page, not one colour
    assert (pixels.mean(axis=2) < 0.3).sum() > 2000  # dark text drawn
