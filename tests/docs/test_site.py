"""The documentation site (Sphinx with MyST, docs/conf.py, docs/) builds strictly, offline, and renders in a browser.

Strict: the build runs with -W --keep-going, so a broken link, a missing page or anchor, a page in no toctree,
an API name autodoc cannot import, or a schema marker that names no model or holds a table out of date fails
it; a test breaks each of them on a small site and sees each one named. The parameter tables come from
netfl.config.schema (docs_build/schema_tables.py), every row with a description, and are written into the
pages' Markdown (readable on a forge or in an editor), where a test and the site's build both fail when one is
out of date with the code. The docstrings' Sphinx roles are links where the target is documented, code where it
is not. The built pages load nothing from the network, and the search works from the disk (file://).
Headless Chromium renders the API reference: its text holds the public API's names, and its screenshot is a
page, not a blank.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import re
from pathlib import Path

import pytest
from chromium_support import dom_of, needs_chromium, screenshot

from netfl.config import schema

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
SPEC = importlib.util.spec_from_file_location("schema_tables", REPO / "docs_build" / "schema_tables.py")
schema_tables = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(schema_tables)
#: The README's command, as the site is built (tests/docs/test_code_blocks.py runs the README's line itself).
STRICT = ["-W", "--keep-going", "-q"]


def sphinx_build(source: Path, out: Path, *options: str) -> tuple[int, str]:
    """``sphinx-build`` in this process (no second import of torch for autodoc): its exit status and warnings."""
    pytest.importorskip("sphinx", reason="the docs extra is not installed: pip install -e '.[docs]'")
    pytest.importorskip("myst_parser", reason="the docs extra is not installed: pip install -e '.[docs]'")
    from sphinx.cmd.build import build_main

    warnings = out.parent / f"{out.name}-warnings.txt"
    status = build_main(
        [*STRICT, *options, "-w", str(warnings), "-d", str(out.parent / f"{out.name}-doctrees"), str(source), str(out)]
    )
    return status, warnings.read_text() if warnings.exists() else ""


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for the whole run: the first xdist worker to ask builds it in the run's shared
    temporary folder while the others wait on its lock, then read the same files."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "docs-site"  # this run's alone
    out, failed = shared / "html", shared / "failed.txt"
    shared.mkdir(exist_ok=True)
    with (shared / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.is_dir() and not failed.exists():
            building = shared / f"building-{os.getpid()}"  # renamed once whole: no worker reads a half-built site
            status, warnings = sphinx_build(DOCS, building)
            if status == 0:
                building.rename(out)
            else:
                failed.write_text(warnings or f"sphinx-build exited {status}")
    assert not failed.exists(), failed.read_text()
    return out


def toctree_pages() -> list[str]:
    """The pages of docs/index.md's toctrees, in the site's order (the navigation's one source)."""
    index = (DOCS / "index.md").read_text()
    entries = []
    for body in re.findall(r"^```\{toctree\}\n(.*?)^```$", index, re.M | re.S):
        for line in body.splitlines():
            if line and not line.startswith(":"):
                entries.append(re.sub(r"^.*<(.*)>$", r"\1", line))
    return entries


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
    pages = schema_tables.pages(DOCS)
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


def test_every_page_is_in_the_navigation_once() -> None:
    entries = toctree_pages()
    pages = {p.relative_to(DOCS).with_suffix("").as_posix() for p in DOCS.rglob("*.md")}
    assert entries[0] == "self" and len(entries) == len(set(entries))
    assert set(entries[1:]) | {"index"} == pages, "every page in a toctree of docs/index.md, every entry a page"
    assert entries.index("getting-started") < entries.index("topology/index") < entries.index("api/netfl")


@pytest.mark.slow
def test_a_broken_link_page_anchor_api_name_or_table_fails_the_build(tmp_path: Path) -> None:
    """A small site with docs/conf.py: each fault is a warning naming it, and the build fails."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "index.md").write_text(
        "# Home\n\n[gone](missing.md), [no such heading](page.md#nowhere), [fine](page.md#a-heading)\n\n"
        "```{toctree}\npage\n```\n"
    )
    stale = schema_tables.block("StopSpec", "stop").replace("| `rounds` |", "| `round` |")
    (source / "page.md").write_text(
        f"# Page\n\n## A heading\n\n{stale}\n\n```{{eval-rst}}\n.. autofunction:: netfl.errors.no_such_name\n```\n"
    )
    (source / "orphan.md").write_text("# In no toctree\n")
    status, warnings = sphinx_build(source, tmp_path / "out", "-c", str(DOCS))
    assert status != 0
    assert "missing.md" in warnings
    assert "nowhere" in warnings
    assert "a-heading" not in warnings
    assert "orphan" in warnings and "toctree" in warnings
    assert "no_such_name" in warnings
    assert "out of date" in warnings and "StopSpec" in warnings


@pytest.mark.slow
def test_the_site_builds_strict_with_every_page(site: Path) -> None:
    for page in toctree_pages()[1:]:
        assert (site / f"{page}.html").is_file(), page
    battery = (site / "topology" / "devices.html").read_text()
    assert '<code class="docutils literal notranslate"><span class="pre">charge_power</span></code>' in battery
    assert "<!-- schema:" not in battery and "<!-- /schema" not in battery and "<table" in battery
    policies = (site / "api" / "policies.html").read_text()
    assert 'id="netfl.policies.base.RoundPolicy"' in policies
    # the docstrings' Sphinx roles: a link where the target is documented, code where it is not, never raw text
    netfl_page = (site / "api" / "netfl.html").read_text()
    assert re.search(
        r'<a class="reference internal" href="algorithms.html#netfl.algorithms.Strategy"[^>]*>'
        r'<code class="xref py py-class',
        netfl_page,
    )
    assert re.search(
        r'<code class="xref py py-class docutils literal notranslate"><span class="pre">'
        r"netfl.ScenarioError</span></code></a>",
        netfl_page,
    )  # documented as netfl.ScenarioError
    # a private module no page documents: its name as code, not a link, and no warning
    assert '(<code class="xref py py-mod docutils literal notranslate"><span class="pre">netfl.results.tracking' in (
        netfl_page
    )
    for page in (site / "api").rglob("*.html"):
        raw = re.findall(r":(?:py:)?(?:class|mod|func|meth|attr|data|exc|obj):`", page.read_text())
        assert not raw, (page, raw)
        assert "<blockquote>" not in page.read_text(), f"{page}: an indented block without :: in a docstring"
    changelog = (site / "changelog.html").read_text()
    assert (REPO / "CHANGELOG.md").read_text().splitlines()[0].lstrip("# ") in changelog
    contributing = (site / "contributing.html").read_text()
    assert "test_code_blocks.py" in contributing


@pytest.mark.slow
def test_nothing_is_loaded_from_the_network(site: Path) -> None:
    """No script, style sheet, font or image from another host: the site reads the same offline."""
    remote = re.compile(r"""<(?:script|link|img|iframe|source)\b[^>]*\b(?:src|href)=["']?(?:https?:)?//""")
    pages = list(site.rglob("*.html"))
    assert len(pages) > 30
    for page in pages:
        assert not remote.findall(page.read_text()), page
    for sheet in [*site.rglob("*.css"), *site.rglob("*.js")]:
        text = sheet.read_text(errors="replace")
        assert not re.search(r"""url\(\s*["']?(?:https?:)?//|@import\s+(?:url\()?["']?(?:https?:)?//""", text), sheet


@pytest.mark.slow
@needs_chromium
def test_the_search_works_from_the_disk(site: Path) -> None:
    dom = dom_of(site / "search.html", query="q=battery")
    found = re.findall(r'<li[^>]*><a href="([^"]+)', dom.split('id="search-results"', 1)[-1])
    assert any("topology/devices.html" in href for href in found), found[:10]


@pytest.mark.slow
@needs_chromium
def test_chromium_renders_the_api_reference(site: Path, tmp_path: Path) -> None:
    page = site / "api" / "netfl.html"
    dom = dom_of(page)
    for name in ("netfl.api.run", "netfl.api.load", "netfl.api.from_dict", "netfl.api.with_own", "netfl.api.Result"):
        assert f'id="{name}"' in dom, name
    assert "ScenarioError" in dom and "run_sweep" in dom and "write_report" in dom
    pixels = screenshot(page, tmp_path / "api.png", 1280, 1600)
    assert pixels.shape[:2] == (1600, 1280)
    assert pixels.std() > 0.05  # text and a header on a page, not one colour
    assert (pixels.mean(axis=2) < 0.3).sum() > 2000  # dark text drawn
