"""The documentation site's configuration: Sphinx, with MyST-Parser reading the Markdown pages and furo's theme.

Build it with ``sphinx-build -W --keep-going docs site`` (the docs extra installs what it needs): every warning,
a broken link, a missing page or anchor, an API name autodoc cannot import, a page in no toctree or a parameter
table out of date with the code, fails the build. The navigation is docs/index.md's toctrees, in their order;
a new page is one line there. Nothing is fetched from the network: furo ships its own assets and uses the
system's fonts, and no extension that loads a CDN script (MathJax) is on.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from sphinx.util import logging

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(REPO))  # netfl from this checkout, as autodoc documents it


def _schema_tables():
    """docs_build/schema_tables.py, which is no package: loaded from its file."""
    spec = importlib.util.spec_from_file_location("schema_tables", REPO / "docs_build" / "schema_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


project = "netfl"
author = "the netfl authors"
html_title = "netfl"
extensions = ["myst_parser", "sphinx.ext.autodoc"]

source_suffix = {".md": "markdown"}
root_doc = "index"
# Markdown headings get GitHub's anchors (`page.md#a-heading` links), as a forge renders them
myst_heading_anchors = 4
# A docstring's Sphinx role to a name documented on a page is a link; one to a name that is not (a private
# module, torch's types) is shown as code, as mkdocstrings' optional references were: autodoc's signatures name
# third-party and internal types that no page documents (about a hundred), and without intersphinx inventories
# (they are fetched from the web) nitpicky mode would fail on each. Links between pages, their anchors and the
# API names the pages' directives ask for are checked all the same (MyST, autodoc: -W).
nitpicky = False
default_role = "literal"  # `name` in a docstring is code, as Markdown shows it

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"
autodoc_preserve_defaults = True
add_module_names = True

html_theme = "furo"
html_copy_source = False
html_show_sourcelink = False
html_show_copyright = False
pygments_style = "default"


def setup(app) -> None:
    schema_tables = _schema_tables()

    def tables(app, docname: str, source: list[str]) -> None:
        """Each page's parameter tables checked against netfl.config.schema and their marker lines dropped: a
        table out of date or a marker naming no model is a warning, which fails the build (-W), and the page keeps
        its markers (the Markdown itself holds the tables)."""
        try:
            source[0] = schema_tables.expand(source[0])
        except ValueError as exc:
            logging.getLogger("schema_tables").warning(str(exc), location=docname, type="schema_tables")

    app.connect("source-read", tables)
