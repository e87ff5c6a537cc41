"""Conformance cases: loading and checking the case.json files of a suite.

A case is a directory holding case.json (conformance/protocol.md, "Cases")
and the files it names: the checkpoint to read, or the source.json to
write. The group of a case is the first dotted component of its id.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocf.conformance.written import CHECKS
from ocf.format.errors import Category

LEVELS = ("required", "recommended", "optional")
OPS = ("read", "write", "merge")
LAYOUTS = ("file", "directory")
CATEGORIES = tuple(c.value for c in Category)
# Ids are dotted slugs, usable as file names and in fnmatch patterns.
ID_PATTERN = re.compile(r"[A-Za-z0-9_+-]+(\.[A-Za-z0-9_+-]+)*")
MEANING_KEYS = ("tensors", "metadata", "object_graph")
SAVE_ID = re.compile(r"[0-9a-f]{16}")
# Conformance profiles (spec/README.md, "Conformance profiles"): what a case needs.
PROFILES = ("core-read", "zstd", "slices", "object-graph", "write", "parts-merge", "pool")
# The profile every case of an op has; a case.json without "profiles" has only it.
BASE_PROFILE = {"read": "core-read", "write": "write", "merge": "parts-merge"}


class CaseError(ValueError):
    """A case.json that breaks the case format, or a suite with such cases."""


@dataclass(frozen=True)
class Case:
    """One case of the suite, its file names resolved."""

    id: str
    level: str
    requirements: tuple[str, ...]
    description: str
    op: str
    expect: dict[str, Any]
    directory: Path
    input: Path | None = None  # read: the checkpoint file or directory; merge: the parts'
    source: Path | None = None  # write: source.json
    layout: str = "file"  # write: the layout to ask for
    save_id: str = ""  # merge: the save whose parts are merged
    parts: int = 0  # merge: how many parts
    profiles: tuple[str, ...] = ()  # every profile the case needs, its op's base first
    # read, merge: symbolic links (name, target) made in a copy of the case directory
    # before the request, since a case directory in a repository cannot hold them.
    links: tuple[tuple[str, str], ...] = ()
    # write: checks of the written bytes beyond the meaning (ocf.conformance.written)
    checks: tuple[str, ...] = ()

    @property
    def group(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def expects_error(self) -> bool:
        return bool(self.expect["result"] == "error")


def load_case(path: Path) -> Case:
    """The case described by the case.json at ``path``; CaseError if it is malformed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CaseError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise CaseError(f"{path}: not a JSON object")
    try:
        return _case(data, path.parent)
    except (KeyError, TypeError, ValueError) as exc:
        raise CaseError(f"{path}: {exc}") from None


def load_cases(root: Path, patterns: Sequence[str] = ()) -> list[Case]:
    """Every case under ``root`` whose id matches one of ``patterns`` (all when
    none), sorted by id; CaseError naming every malformed case."""
    cases: list[Case] = []
    problems: list[str] = []
    for path in sorted(root.rglob("case.json")):
        try:
            cases.append(load_case(path))
        except CaseError as exc:
            problems.append(str(exc))
    seen: dict[str, Path] = {}
    for case in cases:
        if case.id in seen:
            problems.append(f"{case.directory}: id {case.id!r} is also the id of "
                            f"{seen[case.id]}")
        seen[case.id] = case.directory
    if problems:
        raise CaseError("\n".join(problems))
    return sorted((c for c in cases if not patterns or matches(c.id, patterns)),
                  key=lambda c: c.id)


def matches(case_id: str, patterns: Sequence[str]) -> bool:
    """Whether ``case_id`` matches one of the fnmatch ``patterns``."""
    return any(fnmatch.fnmatchcase(case_id, p) for p in patterns)


def _case(data: dict[str, Any], directory: Path) -> Case:
    case_id = _choice(data, "id", None)
    if not ID_PATTERN.fullmatch(case_id):
        raise ValueError(f"id {case_id!r} is not a dotted name of letters, digits, '_+-'")
    requirements = data.get("requirements")
    if not isinstance(requirements, list) or not all(isinstance(r, str) for r in requirements):
        raise ValueError("'requirements' is not a list of strings")
    op = _choice(data, "op", OPS)
    case = Case(id=case_id, level=_choice(data, "level", LEVELS),
                requirements=tuple(requirements), description=str(data.get("description", "")),
                op=op, expect=_expect(data.get("expect")), directory=directory,
                profiles=_profiles(data.get("profiles", [BASE_PROFILE[op]]), op))
    if op == "read":
        return dataclasses.replace(case, input=_inside(directory, _choice(data, "input", None)),
                                   links=_links(data.get("links"), directory))
    if op == "merge":
        return _merge_case(case, data, directory)
    return dataclasses.replace(case, source=_inside(directory, _choice(data, "source", None)),
                               layout=_choice(data, "layout", LAYOUTS),
                               checks=_checks(data.get("checks", [])))


def _checks(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(name in CHECKS for name in value):
        raise ValueError(f"'checks' is {value!r}, not a list of names from "
                         f"{', '.join(CHECKS)}")
    return tuple(value)


def _merge_case(case: Case, data: dict[str, Any], directory: Path) -> Case:
    save_id, parts = _choice(data, "save_id", None), data.get("parts")
    if isinstance(parts, bool) or not isinstance(parts, int):
        raise ValueError(f"'parts' is {parts!r}, not an integer")
    in_range = SAVE_ID.fullmatch(save_id) is not None and 1 <= parts <= 65536
    if not in_range and case.expect != {"result": "error", "category": "INVALID"}:
        # M0 of spec/parts.md: a merger refuses such arguments before touching a file.
        raise ValueError(f"save_id {save_id!r} or 'parts' {parts} is out of range, and only "
                         "a case expecting INVALID may give them")
    path = _inside(directory, _choice(data, "input", None))
    if not path.is_dir():
        raise ValueError("the input of a merge case is not a directory")
    links = _links(data.get("links"), directory)
    for name, target in links:  # the merge gets a copy of its input directory only
        link = directory / name
        if not link.resolve().is_relative_to(path) or \
                not (link.parent / target).resolve().is_relative_to(path):
            raise ValueError(f"link {name!r} of a merge case, or its target, is outside "
                             "the case's input directory")
    return dataclasses.replace(case, input=path, save_id=save_id, parts=parts, links=links)


def _profiles(profiles: Any, op: str) -> tuple[str, ...]:
    """The profiles a case needs: known names, its op's base profile among them."""
    if not isinstance(profiles, list) or not all(p in PROFILES for p in profiles) \
            or BASE_PROFILE[op] not in profiles or len(set(profiles)) != len(profiles):
        raise ValueError(f"'profiles' is {profiles!r}, not a list of distinct names from "
                         f"{', '.join(PROFILES)} holding {BASE_PROFILE[op]!r}")
    return tuple(profiles)


def claimed(case: Case, profiles: Sequence[str] | None) -> bool:
    """Whether an adapter declaring ``profiles`` (None: every profile, as adapters
    that declare none are judged) claims ``case``: it declares every profile the case
    needs."""
    return profiles is None or set(case.profiles) <= set(profiles)


def _choice(data: dict[str, Any], key: str, allowed: Sequence[str] | None) -> str:
    item = data.get(key)
    if not isinstance(item, str) or (allowed is not None and item not in allowed):
        wanted = "a string" if allowed is None else " or ".join(repr(a) for a in allowed)
        raise ValueError(f"{key!r} is {item!r}, not {wanted}")
    return item


def _expect(expect: Any) -> dict[str, Any]:
    if not isinstance(expect, dict):
        raise ValueError("'expect' is not an object")
    result = _choice(expect, "result", ("ok", "error"))
    if result == "error":
        _choice(expect, "category", CATEGORIES)
        return expect
    missing = [key for key in MEANING_KEYS if key not in expect]
    if missing:
        raise ValueError(f"'expect' of a successful case lacks {', '.join(missing)}")
    return expect


def _links(value: Any, directory: Path) -> tuple[tuple[str, str], ...]:
    """The symbolic links a read case declares: each a new relative name in the case
    directory, pointing by a relative target to a path inside the case directory (which
    need not exist: a dangling link is a case too)."""
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError("'links' is not an object of names to targets")
    root = directory.resolve()
    for name, target in value.items():
        link = directory / name
        if not name or Path(name).is_absolute() or ".." in Path(name).parts or \
                os.path.lexists(link):
            raise ValueError(f"link {name!r} is not a new relative name in the case directory")
        pointed = (link.parent / target).resolve()
        if Path(target).is_absolute() or not pointed.is_relative_to(root):
            raise ValueError(f"link {name!r} points to {target!r}, outside the case")
    return tuple(sorted(value.items()))


def make_links(case: Case, root: Path) -> None:
    """Make the links of ``case`` in ``root``, a copy of its directory (read) or of its
    input directory (merge)."""
    assert case.input is not None
    base = case.directory.resolve() if case.op == "read" else case.input
    for name, target in case.links:
        link = root / (case.directory.resolve() / name).relative_to(base)
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, link)


def materialize(case: Case, workdir: Path) -> Path:
    """The input of a read case: in a copy of its directory under ``workdir`` with its
    links made, when it declares links; else where it is."""
    assert case.input is not None
    if not case.links:
        return case.input
    copy = workdir / "linked" / case.id
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(case.directory, copy, symlinks=True)
    make_links(case, copy)
    return copy / case.input.relative_to(case.directory.resolve())


def _inside(directory: Path, name: str) -> Path:
    """The existing file ``name`` of the case directory, which it must not leave."""
    path = (directory / name).resolve()
    if not path.is_relative_to(directory.resolve()):
        raise ValueError(f"{name!r} is outside the case directory")
    if not path.exists():
        raise ValueError(f"{name!r} does not exist")
    return path
