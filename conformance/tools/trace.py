"""Traceability of the conformance suite: every MUST of spec/ has a case.

    .venv/bin/python conformance/tools/trace.py [--spec DIR] [--cases DIR] [--untestable FILE]

Reads the requirement definitions of spec/*.md (a paragraph or list item that
starts with ``**[R-...]**``) and the strongest BCP 14 keyword of each, loads
every conformance/cases/<group>/<name>/case.json, and exits 1 listing:

- (a) MUST requirements that no case cites and conformance/untestable.txt
  does not list;
- (b) cases citing requirement ids the spec does not define;
- (c) case.json files that break the case format: unknown or missing keys,
  a bad id, level or category, a level stronger than the keywords of the
  requirements cited, files that are missing (or present but unreferenced),
  a source.json that does not describe its tensors;
- entries of untestable.txt that name no requirement, a requirement that is
  not MUST, or one that a case covers after all.

Prints one summary line. Exit status 0 when nothing is listed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEFINITION = re.compile(r"^(?:[-*]\s+|\d+\.\s+)?\*\*\[(R-[A-Z]+-\d{3})\]\*\*")
KEYWORDS = {  # BCP 14 key words, as the strength of the requirement they make
    "MUST": "MUST", "MUST NOT": "MUST", "REQUIRED": "MUST", "SHALL": "MUST",
    "SHALL NOT": "MUST", "SHOULD": "SHOULD", "SHOULD NOT": "SHOULD", "RECOMMENDED": "SHOULD",
    "NOT RECOMMENDED": "SHOULD", "MAY": "MAY", "OPTIONAL": "MAY",
}
KEYWORD = re.compile(r"(?<![A-Za-z`])(MUST NOT|MUST|REQUIRED|SHALL NOT|SHALL|SHOULD NOT|SHOULD|"
                     r"NOT RECOMMENDED|RECOMMENDED|MAY|OPTIONAL)(?![A-Za-z`])")
STRENGTH = {"MUST": 3, "SHOULD": 2, "MAY": 1}
LEVEL_NEEDS = {"required": "MUST", "recommended": "SHOULD", "optional": "MAY"}
GROUPS = ("read", "reject", "write", "merge")
CATEGORIES = {"MALFORMED", "INVALID", "UNSUPPORTED_VERSION", "UNKNOWN_REQUIRED_FEATURE",
              "INTEGRITY", "LIMIT_EXCEEDED", "NOT_FOUND"}
CASE_ID = re.compile(r"^[a-z]+\.[a-z0-9][a-z0-9._-]*[a-z0-9]$")
DTYPES = {"bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2,
          "uint32": 4, "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
          "complex64": 8, "complex128": 16, "float8_e4m3fn": 1, "float8_e5m2": 1, "bytes": 0}
PROFILES = ("core-read", "zstd", "slices", "object-graph", "write", "parts-merge", "pool")
BASE_PROFILE = {"read": "core-read", "write": "write", "merge": "parts-merge"}
READ_KEYS = {"id", "level", "requirements", "profiles", "description", "op", "input", "expect"}
WRITE_KEYS = {"id", "level", "requirements", "profiles", "description", "op", "source",
              "layout", "expect"}
MERGE_KEYS = {"id", "level", "requirements", "profiles", "description", "op", "input",
              "save_id", "parts",
              "expect"}
OK_KEYS = {"result", "tensors", "metadata", "object_graph"}
# Keys a case.json may leave out: the symbolic links of a read case.
OPTIONAL_KEYS = {"read": {"links"}, "write": {"checks"}, "merge": {"links"}}
# The checks of written bytes a write case may name (conformance/protocol.md, Cases).
WRITE_CHECKS = {"deterministic-index", "no-gaps", "zstd-content-size"}


@dataclass
class Requirement:
    id: str
    document: str
    keywords: set[str]

    @property
    def strength(self) -> str:
        """The strongest keyword class (MUST, SHOULD or MAY), or '' for none."""
        classes = {KEYWORDS[k] for k in self.keywords}
        return max(classes, key=STRENGTH.__getitem__) if classes else ""


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)

    def add(self, message: str) -> None:
        self.problems.append(message)


# -- the specification ----------


def _blocks(text: str) -> Iterator[str]:
    """Paragraphs and list items; a list item keeps its indented continuation lines
    (nested lists and paragraphs that belong to it), blank lines included."""
    lines = text.splitlines()
    n = 0
    in_code = False
    while n < len(lines):
        line = lines[n]
        if line.lstrip().startswith("```"):
            in_code = not in_code
            n += 1
            continue
        if in_code or not line.strip():
            n += 1
            continue
        indent = len(line) - len(line.lstrip())
        item = bool(re.match(r"\s*(?:[-*]|\d+\.)\s", line))
        block = [line]
        n += 1
        while n < len(lines):
            nxt = lines[n]
            if not nxt.strip():
                # A blank line ends a paragraph; a list item goes on if indented text follows.
                ahead = n + 1
                while ahead < len(lines) and not lines[ahead].strip():
                    ahead += 1
                if item and ahead < len(lines) and (
                        len(lines[ahead]) - len(lines[ahead].lstrip()) > indent):
                    block.extend(lines[n:ahead])
                    n = ahead
                    continue
                break
            if item and re.match(r"\s*(?:[-*]|\d+\.)\s", nxt) and (
                    len(nxt) - len(nxt.lstrip()) <= indent):
                break  # the next item of the same list
            block.append(nxt)
            n += 1
        yield "\n".join(block)


def requirements(spec: Path) -> tuple[dict[str, Requirement], list[str]]:
    """Every requirement defined in spec/*.md, and problems (ids defined twice)."""
    found: dict[str, Requirement] = {}
    problems: list[str] = []
    for document in sorted(spec.glob("*.md")):
        for block in _blocks(document.read_text(encoding="utf-8")):
            match = DEFINITION.match(block.lstrip())
            if not match:
                continue
            rid = match.group(1)
            if rid in found:
                problems.append(f"{rid} is defined twice ({found[rid].document}, "
                                f"{document.name})")
                continue
            text = re.sub(r"`[^`]*`", "", block)  # keywords in code spans are not keywords
            found[rid] = Requirement(rid, document.name, set(KEYWORD.findall(text)))
    return found, problems


# -- the cases ----------


def load_cases(cases: Path, report: Report) -> dict[str, dict[str, Any]]:
    """Every case.json by id, checked against the case format."""
    loaded: dict[str, dict[str, Any]] = {}
    if not cases.is_dir():
        report.add(f"{cases}: no cases directory")
        return loaded
    for group_dir in sorted(p for p in cases.iterdir()):
        if not group_dir.is_dir():
            report.add(f"{group_dir}: a file where a group directory belongs")
            continue
        if group_dir.name not in GROUPS:
            report.add(f"{group_dir.name}: unknown group (expected one of {', '.join(GROUPS)})")
        for case_dir in sorted(p for p in group_dir.iterdir()):
            where = f"{group_dir.name}/{case_dir.name}"
            path = case_dir / "case.json"
            if not path.is_file():
                report.add(f"{where}: no case.json")
                continue
            try:
                case = json.loads(path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                report.add(f"{where}/case.json: not JSON: {exc}")
                continue
            problems = check_case(case, case_dir, group_dir.name)
            for problem in problems:
                report.add(f"{where}/case.json: {problem}")
            if isinstance(case, dict) and isinstance(case.get("id"), str):
                if case["id"] in loaded:
                    report.add(f"{where}/case.json: id {case['id']!r} used twice")
                loaded[case["id"]] = case
    return loaded


def check_case(case: Any, directory: Path, group: str) -> list[str]:
    """Problems of one case.json against the case format."""
    if not isinstance(case, dict):
        return ["not a JSON object"]
    problems: list[str] = []
    op = case.get("op")
    if op not in ("read", "write", "merge"):
        return [f"op is {op!r}, expected 'read', 'write' or 'merge'"]
    allowed = {"read": READ_KEYS, "write": WRITE_KEYS, "merge": MERGE_KEYS}[op]
    unknown, missing = set(case) - allowed - OPTIONAL_KEYS[op], allowed - set(case)
    if unknown:
        problems.append(f"unknown keys {sorted(unknown)}")
    if missing:
        problems.append(f"missing keys {sorted(missing)}")
    case_id = case.get("id")
    expected_id = f"{group}.{directory.name}"
    if not isinstance(case_id, str) or not CASE_ID.match(case_id):
        problems.append(f"id {case_id!r} is not a dotted lower-case name")
    elif case_id != expected_id:
        problems.append(f"id {case_id!r} does not match its directory ({expected_id!r})")
    if (op == "write") != (group == "write") or (op == "merge") != (group == "merge"):
        problems.append(f"op {op!r} in group {group!r}")
    if case.get("level") not in LEVEL_NEEDS:
        problems.append(f"level {case.get('level')!r} is not one of {sorted(LEVEL_NEEDS)}")
    cited = case.get("requirements")
    if not isinstance(cited, list) or not cited or not all(isinstance(r, str) for r in cited):
        problems.append("requirements must be a non-empty list of ids")
    elif len(set(cited)) != len(cited):
        problems.append("requirements lists an id twice")
    profiles = case.get("profiles")
    if not isinstance(profiles, list) or BASE_PROFILE[op] not in profiles or \
            len(set(profiles)) != len(profiles) or not set(profiles) <= set(PROFILES):
        problems.append(f"profiles {profiles!r} must be distinct names from {list(PROFILES)}, "
                        f"{BASE_PROFILE[op]!r} among them")
    description = case.get("description")
    if not isinstance(description, str) or not description.strip() or "\n" in description:
        problems.append("description must be one non-empty line")
    referenced: set[Path] = {directory / "case.json"}
    expect = case.get("expect")
    if op == "read":
        problems += _check_read(case, directory, expect, referenced, group)
    elif op == "merge":
        problems += _check_merge(case, directory, expect, referenced)
    else:
        problems += _check_write(case, directory, expect, referenced)
    for file in sorted(p for p in directory.rglob("*") if p.is_file()):
        if not any(file == r or r in file.parents for r in referenced):
            problems.append(f"file {file.relative_to(directory)} is not referenced")
    return problems


def _check_expect_ok(expect: dict[str, Any]) -> list[str]:
    problems = []
    if set(expect) != OK_KEYS:
        problems.append(f"expect of an ok result must hold exactly {sorted(OK_KEYS)}")
    tensors = expect.get("tensors")
    if not isinstance(tensors, dict):
        problems.append("expect.tensors must be an object")
    else:
        for key, value in tensors.items():
            if not (isinstance(value, dict) and set(value) == {"dtype", "shape", "sha256"}
                    and value["dtype"] in DTYPES and isinstance(value["shape"], list)
                    and all(isinstance(d, int) and d >= 0 for d in value["shape"])
                    and isinstance(value["sha256"], str)
                    and re.fullmatch(r"[0-9a-f]{64}", value["sha256"])):
                problems.append(f"expect.tensors[{key!r}] is not {{dtype, shape, sha256}}")
    if not isinstance(expect.get("metadata"), dict):
        problems.append("expect.metadata must be an object")
    graph = expect.get("object_graph")
    if graph is not None and not isinstance(graph, dict):
        problems.append("expect.object_graph must be null or an object")
    return problems


def _inside(directory: Path, name: Any) -> Path | None:
    if not isinstance(name, str) or not name or name.startswith("/") or \
            ".." in Path(name).parts:
        return None
    return directory / name


def _check_read(case: dict[str, Any], directory: Path, expect: Any, referenced: set[Path],
                group: str) -> list[str]:
    problems = []
    if not isinstance(expect, dict) or expect.get("result") not in ("ok", "error"):
        return ["expect.result must be 'ok' or 'error'"]
    if expect["result"] == "ok":
        problems += _check_expect_ok(expect)
        if group != "read":
            problems.append("a case expecting success belongs to the 'read' group")
    else:
        if set(expect) != {"result", "category"}:
            problems.append("expect of an error must hold exactly result and category")
        if expect.get("category") not in CATEGORIES:
            problems.append(f"category {expect.get('category')!r} is not one of the seven")
        if group != "reject":
            problems.append("a case expecting an error belongs to the 'reject' group")
    target = _inside(directory, case.get("input"))
    if target is None:
        problems.append(f"input {case.get('input')!r} is not a relative path in the case")
    elif not target.exists():
        problems.append(f"input {case.get('input')!r} does not exist")
    else:
        # A file input inside a directory (D/index.ocf) references the whole directory.
        referenced.add(directory / Path(str(case["input"])).parts[0])
    return problems + _check_links(case.get("links", {}), directory, referenced)


def _check_links(links: Any, directory: Path, referenced: set[Path]) -> list[str]:
    """``links`` maps new relative names to relative targets, files or directories of
    the case."""
    if not isinstance(links, dict):
        return ["links must be an object of names to targets"]
    problems = []
    for name, target in links.items():
        link = _inside(directory, name)
        if link is None or link.exists() or link.is_symlink():
            problems.append(f"link {name!r} is not a new relative name in the case")
            continue
        pointed = (link.parent / str(target)).resolve()
        if not isinstance(target, str) or target.startswith("/") or \
                not pointed.is_relative_to(directory.resolve()) or \
                (pointed.exists() and not (pointed.is_file() or pointed.is_dir())):
            problems.append(f"link {name!r} points outside the case or to a special file")
            continue
        referenced.add(directory / pointed.relative_to(directory.resolve()))
    return problems


def _check_merge(case: dict[str, Any], directory: Path, expect: Any,
                 referenced: set[Path]) -> list[str]:
    """A merge case: a directory of parts, the save id and count, a meaning or an error."""
    problems = []
    if not isinstance(expect, dict) or expect.get("result") not in ("ok", "error"):
        return ["expect.result must be 'ok' or 'error'"]
    if expect["result"] == "ok":
        problems += _check_expect_ok(expect)
    elif set(expect) != {"result", "category"} or expect.get("category") not in CATEGORIES:
        problems.append("expect of an error must hold result and one of the seven categories")
    save_id, parts = case.get("save_id"), case.get("parts")
    if not isinstance(save_id, str) or isinstance(parts, bool) or not isinstance(parts, int):
        problems.append(f"save_id {save_id!r} is not a string or parts {parts!r} not an integer")
    elif (not re.fullmatch(r"[0-9a-f]{16}", save_id) or not 1 <= parts <= 65536) \
            and expect != {"result": "error", "category": "INVALID"}:
        problems.append(f"save_id {save_id!r} or parts {parts} is out of range (M0 of "
                        "spec/parts.md), so the case must expect INVALID")
    target = _inside(directory, case.get("input"))
    if target is None or not target.is_dir():
        problems.append(f"input {case.get('input')!r} is not a directory in the case")
    else:
        referenced.add(target)
        links = case.get("links", {})
        if isinstance(links, dict) and not all(
                str(name).startswith(f"{case['input']}/") for name in links):
            problems.append("the links of a merge case must lie in its input directory")
    return problems + _check_links(case.get("links", {}), directory, referenced)


def _check_write(case: dict[str, Any], directory: Path, expect: Any,
                 referenced: set[Path]) -> list[str]:
    problems = []
    if case.get("layout") not in ("file", "directory"):
        problems.append(f"layout {case.get('layout')!r} is not 'file' or 'directory'")
    checks = case.get("checks", [])
    if not isinstance(checks, list) or not set(checks) <= WRITE_CHECKS:
        problems.append(f"checks {checks!r} is not a list of names from "
                        f"{sorted(WRITE_CHECKS)}")
    if not isinstance(expect, dict) or expect.get("result") != "ok":
        problems.append("expect.result of a write case must be 'ok'")
    else:
        problems += _check_expect_ok(expect)
    source_path = _inside(directory, case.get("source"))
    if source_path is None or not source_path.is_file():
        return [*problems, f"source {case.get('source')!r} does not exist"]
    referenced.add(source_path)
    try:
        source = json.loads(source_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        return [*problems, f"source is not JSON: {exc}"]
    if not isinstance(source, dict) or set(source) != {"tensors", "metadata", "object_graph"}:
        return [*problems, "source must hold exactly tensors, metadata and object_graph"]
    for key, tensor in (source["tensors"] or {}).items():
        if not isinstance(tensor, dict) or set(tensor) != {"dtype", "shape", "data"} or \
                tensor["dtype"] not in DTYPES:
            problems.append(f"source tensor {key!r} is not {{dtype, shape, data}}")
            continue
        data = _inside(directory, tensor["data"])
        if data is None or not data.is_file():
            problems.append(f"source tensor {key!r}: data file {tensor['data']!r} is missing")
            continue
        referenced.add(data)
        count = 1
        for d in tensor["shape"]:
            count *= d
        itemsize = DTYPES[tensor["dtype"]]
        size = data.stat().st_size
        if itemsize and size != count * itemsize:
            problems.append(f"source tensor {key!r}: {size} bytes for {count} elements of "
                            f"{tensor['dtype']}")
        if not itemsize and size < 8 * count:
            problems.append(f"source tensor {key!r}: {size} bytes cannot hold {count} lengths")
    graph = source["object_graph"]
    if graph is not None:
        node_keys = {"type_name", "children", "attributes", "slot_variables", "metadata"}
        if not isinstance(graph, dict) or set(graph) != {"nodes"} or not all(
                isinstance(n, dict) and set(n) == node_keys for n in graph["nodes"]):
            problems.append(f"source object_graph must be {{nodes: [{sorted(node_keys)}]}}")
        else:
            problems += _underived_keys(graph["nodes"])
    if expect is not None and isinstance(expect, dict) and \
            set(source["tensors"] or {}) != set(expect.get("tensors") or {}):
        problems.append("source and expect name different tensors")
    return problems


def _canonical_paths(nodes: list[dict[str, Any]]) -> list[str | None]:
    """Canonical paths by the algorithm of spec/objects.md [R-GRAPH-007]: breadth-first
    along child edges, then one pass over the slot variables."""
    def join(*parts: str) -> str:
        return "/".join(p for p in parts if p)

    paths: list[str | None] = [""] + [None] * (len(nodes) - 1)
    queue = [0]
    for u in queue:  # the list grows while it is walked: first in, first out
        for name, v in nodes[u]["children"]:
            if paths[v] is None:
                paths[v] = join(paths[u] or "", name)
                queue.append(v)
    by_edges = [p is not None for p in paths]
    for u, node in enumerate(nodes):
        if by_edges[u]:
            for variable, slot_name, s in node["slot_variables"]:
                if paths[s] is None and by_edges[variable]:
                    paths[s] = join(paths[u] or "", ".slot", paths[variable] or "", slot_name)
    return paths


def _underived_keys(nodes: list[dict[str, Any]]) -> list[str]:
    """Attribute keys of a source.json graph that differ from the derived ones: a write
    case gives the keys [R-GRAPH-007] derives, so that storing or deriving them agree."""
    paths = _canonical_paths(nodes)
    problems = []
    for n, node in enumerate(nodes):
        for name, key in node["attributes"]:
            path = paths[n]
            derived = None if path is None else (f"{path}/.{name}" if path else f".{name}")
            if key != derived:
                problems.append(f"source node {n} attribute {name!r} names {key!r}, "
                                f"not the derived key {derived!r}")
    return problems


# -- untestable requirements ----------


def load_untestable(path: Path, report: Report) -> tuple[dict[str, str], dict[str, str]]:
    """``R-ID  justification`` lines; '#' starts a comment. A line ``R-ID  (part) ...``
    names an untestable part of a requirement that cases cover otherwise; those are
    checked to name a MUST requirement. Returns (whole requirements, parts)."""
    listed: dict[str, str] = {}
    parts: dict[str, str] = {}
    if not path.exists():
        return listed, parts
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip() if raw.lstrip().startswith("#") else raw.strip()
        if not line:
            continue
        match = re.match(r"^(R-[A-Z]+-\d{3})\s+(\S.*)$", line)
        if not match:
            report.add(f"{path.name}:{number}: expected 'R-XXX-NNN justification'")
            continue
        into = parts if match.group(2).startswith("(part) ") else listed
        if match.group(1) in into:
            report.add(f"{path.name}:{number}: {match.group(1)} listed twice")
        into[match.group(1)] = match.group(2)
    return listed, parts


# -- putting it together ----------


def trace(spec: Path, cases: Path, untestable: Path) -> tuple[Report, str]:
    report = Report()
    defined, problems = requirements(spec)
    for problem in problems:
        report.add(problem)
    if not defined:
        report.add(f"{spec}: no requirement definitions found")
    loaded = load_cases(cases, report)
    covered: dict[str, int] = {}
    for case_id, case in sorted(loaded.items()):
        cited = case.get("requirements") if isinstance(case.get("requirements"), list) else []
        strongest = 0
        for rid in cited:
            if rid not in defined:
                report.add(f"{case_id}: cites {rid}, which the spec does not define")
                continue
            covered[rid] = covered.get(rid, 0) + 1
            strongest = max(strongest, STRENGTH.get(defined[rid].strength, 0))
        need = LEVEL_NEEDS.get(case.get("level", ""))
        if need and cited and strongest < STRENGTH[need]:
            report.add(f"{case_id}: level {case['level']!r} needs a {need} requirement among "
                       "those it cites")
    listed, parts = load_untestable(untestable, report)
    for rid in sorted(parts):
        if rid not in defined or defined[rid].strength != "MUST":
            report.add(f"{untestable.name}: {rid} (part) is not a MUST requirement of the spec")
    for rid in sorted(listed):
        if rid not in defined:
            report.add(f"{untestable.name}: {rid} is not defined in the spec")
        elif defined[rid].strength != "MUST":
            report.add(f"{untestable.name}: {rid} is not a MUST requirement")
        elif rid in covered:
            report.add(f"{untestable.name}: {rid} is covered by {covered[rid]} case(s); remove "
                       "it from the list")
    must = sorted(r for r, req in defined.items() if req.strength == "MUST")
    for rid in must:
        if rid not in covered and rid not in listed:
            report.add(f"{rid} ({defined[rid].document}) is a MUST requirement without a case")
    levels: dict[str, int] = {}
    for case in loaded.values():
        level = str(case.get("level"))
        levels[level] = levels.get(level, 0) + 1
    covered_must = sum(1 for r in must if r in covered)
    summary = (f"trace: {len(defined)} requirements ({len(must)} MUST): {covered_must} MUST "
               f"covered, {sum(1 for r in must if r in listed and r not in covered)} untestable, "
               f"{sum(1 for r in must if r not in covered and r not in listed)} uncovered; "
               f"{len(loaded)} cases ("
               + ", ".join(f"{levels[k]} {k}" for k in sorted(levels)) + "); "
               + (f"{len(report.problems)} problem(s)" if report.problems else "OK"))
    return report, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, default=ROOT / "spec")
    parser.add_argument("--cases", type=Path, default=ROOT / "conformance" / "cases")
    parser.add_argument("--untestable", type=Path,
                        default=ROOT / "conformance" / "untestable.txt")
    args = parser.parse_args(argv)
    report, summary = trace(args.spec, args.cases, args.untestable)
    for problem in report.problems:
        print(problem)
    print(summary)
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
