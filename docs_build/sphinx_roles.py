"""Sphinx's cross-reference roles in netfl's docstrings, made links on the API pages (a Griffe extension).

The docstrings name other objects as Sphinx does (:class:`~netfl.config.schema.Scenario`, :mod:`netfl.sim`,
:meth:`run`), which Markdown would show as raw text. This extension, loaded by mkdocstrings' Python handler
(mkdocs.yml, ``extensions:``), rewrites each role, once Griffe has read the code and before any docstring is
parsed, as an optional mkdocs-autorefs reference: a link where the target is rendered on a page of the site,
the name as code where it is not (an optional reference never fails a strict build). The text shown is Sphinx's:
the last part of the name after ``~``, the name as written otherwise, the title of ``title <target>``; ``!``
shows the name without a link.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

#: The Python domain's roles, with or without their ``py:`` prefix.
ROLE = re.compile(
    r":(?:py:)?(?P<role>class|mod|func|meth|attr|data|exc|obj|const|type):"
    r"`(?P<text>[^`]+)`"
)
#: Where netfl's names are documented under another path: policies/ imports as netfl.policies, and mkdocstrings
#: reads it from its folder (docs/api/policies.md), so its objects' identifiers start with ``policies.``.
DOCUMENTED_AS = {"netfl.policies.": "policies."}


def reference(text: str, resolve: Any, canonical: Any = lambda path: None) -> str:
    """The HTML of one role's ``text`` (``~a.b.C``, ``a.b.C``, ``title <a.b.C>``, ``!C``); ``resolve(name)`` is
    the full path of a name as the docstring's object sees it (its module's imports and members), or None;
    ``canonical(path)`` where the object of a path (a name re-exported, ``netfl.api.run`` for ``netfl.run``) is
    defined, or None."""
    explicit = re.fullmatch(r"(?P<title>.*?)\s*<(?P<target>[^<>]+)>", text)
    if explicit:
        title, target = explicit["title"], explicit["target"]
    else:
        target = text
        title = text.lstrip("~!").rsplit(".", 1)[-1] if text.startswith("~") else text.lstrip("!")
    code = f"<code>{html.escape(title)}</code>"
    if target.startswith("!"):
        return code
    target = target.lstrip("~.")
    identifier = resolve(target) or target
    identifier = canonical(identifier) or identifier
    for written, documented in DOCUMENTED_AS.items():
        if identifier.startswith(written):
            identifier = documented + identifier[len(written) :]
    return f'<autoref identifier="{html.escape(identifier)}" optional>{code}</autoref>'


def convert(docstring: str, resolve: Any, canonical: Any = lambda path: None) -> str:
    """``docstring`` with every Python role replaced by its reference."""
    return ROLE.sub(lambda m: reference(m["text"], resolve, canonical), docstring)


class SphinxRoles(griffe.Extension):
    """Rewrites the roles of every docstring Griffe loads."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if obj.is_alias or obj.docstring is None or ":" not in obj.docstring.value:
            return

        def resolve(name: str) -> str | None:
            try:
                return obj.resolve(name) if "." not in name else _resolved_dotted(obj, name)
            except (griffe.NameResolutionError, KeyError, ValueError, AttributeError):
                return None

        def canonical(path: str) -> str | None:
            try:
                return loader.modules_collection[path].canonical_path
            except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
                return None

        obj.docstring.value = convert(obj.docstring.value, resolve, canonical)


def _resolved_dotted(obj: griffe.Object, name: str) -> str | None:
    """``Class.member`` or a full path: its first part resolved in ``obj``'s scope (a full path stays itself)."""
    head, _, rest = name.partition(".")
    try:
        return f"{obj.resolve(head)}.{rest}"
    except griffe.NameResolutionError:
        return name
