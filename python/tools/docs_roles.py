"""A griffe extension for the API reference: Sphinx roles in docstrings become links.

The docstrings cross-reference with Sphinx roles (``:func:`save_file```,
``:class:`~ocf.objects.restore_status.RestoreStatus```), which the Google-style
parser of mkdocstrings leaves as literal text. Once the package is loaded,
each role becomes an optional autorefs reference to the name resolved in the
docstring's scope: a link where the reference documents that object, the
name in code type where it does not (a private module), never a broken link
(mkdocs.yml loads this file: ``extensions: [python/tools/docs_roles.py]``).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|data|attr|exc|obj|const):`(?P<tilde>~?)"
                  r"(?P<target>[\w.]+)(?:\(\))?`")


def identifier_of(obj: griffe.Object | griffe.Alias, target: str) -> str:
    """The full dotted path ``target`` names in the scope of ``obj``'s docstring."""
    if target.startswith("ocf.") or target == "ocf":
        return target
    first, _, rest = target.partition(".")
    scope: Any = obj if obj.is_module or obj.is_class else obj.parent
    try:
        resolved = scope.resolve(first) if scope is not None else first
    except (griffe.NameResolutionError, KeyError, AttributeError):
        return target
    return f"{resolved}.{rest}" if rest else resolved


def rewritten(obj: griffe.Object | griffe.Alias, text: str) -> str:
    def link(match: re.Match[str]) -> str:
        target = match["target"]
        shown = target.rsplit(".", 1)[-1] if match["tilde"] else target
        return (f'<autoref identifier="{identifier_of(obj, target)}" optional>'
                f"<code>{shown}</code></autoref>")
    return ROLE.sub(link, text)


class SphinxRoles(griffe.Extension):
    """Rewrite the roles of every docstring of a loaded package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        todo: list[griffe.Object | griffe.Alias] = [pkg]
        seen: set[str] = set()
        while todo:
            obj = todo.pop()
            if obj.path in seen or obj.is_alias:
                continue
            seen.add(obj.path)
            if obj.docstring is not None:
                obj.docstring.value = rewritten(obj, obj.docstring.value)
            todo.extend(obj.members.values())
