"""Tests for python/tools/lint_proto.py, run as a subprocess like CI does."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "lint_proto.py"
LINE_RE = re.compile(r"^(?P<path>.+):(?P<line>\d+): (?P<rule>[A-Z0-9_]+): .+$")

# A file that passes every rule. It has one of each kind of element,
# including the synthetic ones that must be exempt: the map entry of
# `labels` and the oneof protoc makes for the proto3 `optional` field.
GOOD = """\
// A file for the lint tests.
syntax = "proto3";

package acme.v1;

// A colour.
enum Color {
  // Not set.
  COLOR_UNSPECIFIED = 0;
  // Red.
  COLOR_RED = 1;
}

// A widget.
message Widget {
  // The name.
  string name = 1;
  // The tags.
  repeated string tags = 2;
  // Labels by key.
  map<string, string> labels = 3;
  // The outline.
  oneof outline {
    // Round.
    double radius = 4;
    // Square.
    double side = 5;
  }
  // How many, if known.
  optional int32 count = 6;
  // The parts.
  repeated Part parts = 7;

  // A part of a widget.
  message Part {
    // The part id.
    string part_id = 1;
  }
}
"""

PROTO2 = """\
// An old file.
syntax = "proto2";

package acme.v1;

// A widget.
message Widget {
  // The name.
  optional string name = 1;
}
"""

# rule -> (path of the file under the include root, text to replace in GOOD
# (every occurrence), replacement): each makes GOOD break that rule only.
BAD_CASES: dict[str, tuple[str, str, str]] = {
    "PACKAGE_VERSION_SUFFIX": (
        "acme/core/widget.proto",
        "package acme.v1;",
        "package acme.core;",
    ),
    "PACKAGE_DIRECTORY_MATCH": ("acme/v2/widget.proto", "", ""),
    "FILE_LOWER_SNAKE_CASE": ("acme/v1/WidgetParts.proto", "", ""),
    "MESSAGE_PASCAL_CASE": ("acme/v1/widget.proto", "Part ", "part_info "),
    "FIELD_LOWER_SNAKE_CASE": (
        "acme/v1/widget.proto",
        "string part_id = 1;",
        "string partId = 1;",
    ),
    "ENUM_PASCAL_CASE": ("acme/v1/widget.proto", "enum Color {", "enum color {"),
    "ENUM_VALUE_UPPER_SNAKE_CASE": (
        "acme/v1/widget.proto",
        "COLOR_RED = 1;",
        "COLOR_Red = 1;",
    ),
    "ENUM_VALUE_PREFIX": ("acme/v1/widget.proto", "COLOR_RED = 1;", "RED = 1;"),
    "ENUM_ZERO_VALUE_SUFFIX": (
        "acme/v1/widget.proto",
        "COLOR_UNSPECIFIED = 0;",
        "COLOR_UNKNOWN = 0;",
    ),
    "COMMENT_MESSAGE": (
        "acme/v1/widget.proto",
        "  // A part of a widget.\n",
        "",
    ),
    "COMMENT_FIELD": ("acme/v1/widget.proto", "  // The name.\n", ""),
    "COMMENT_ENUM": ("acme/v1/widget.proto", "// A colour.\n", ""),
    "COMMENT_ENUM_VALUE": ("acme/v1/widget.proto", "  // Red.\n", "  //\n"),
    "COMMENT_ONEOF": ("acme/v1/widget.proto", "  // The outline.\n", ""),
    "REPEATED_FIELD_NAMES_PLURAL": (
        "acme/v1/widget.proto",
        "repeated string tags = 2;",
        "repeated string tag = 2;",
    ),
}


def run_tool(*args: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOL), *(str(a) for a in args)],
        capture_output=True,
        text=True,
        check=False,
    )


def reported_rules(stdout: str) -> list[str]:
    rules = []
    for line in stdout.splitlines():
        match = LINE_RE.match(line)
        assert match, f"badly formatted report line: {line!r}"
        rules.append(match["rule"])
    return rules


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_real_protos_pass() -> None:
    result = run_tool()
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.fullmatch(r"\d+ files, \d+ definitions checked, no problems\n", result.stdout)


def test_good_file_passes(tmp_path: Path) -> None:
    write(tmp_path, "acme/v1/widget.proto", GOOD)
    result = run_tool(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    # 2 messages, 8 fields, 1 oneof, 1 enum, 2 enum values.
    assert result.stdout == "1 files, 14 definitions checked, no problems\n"


def test_all_rules_covered() -> None:
    doc = TOOL.read_text(encoding="utf-8").split('"""')[1]
    documented = set(re.findall(r"^  ([A-Z][A-Z0-9_]+) ", doc, re.MULTILINE))
    assert documented == set(BAD_CASES) | {"SYNTAX_PROTO3"}


@pytest.mark.parametrize("rule", sorted(BAD_CASES))
def test_bad_file_reports_exactly_its_rule(tmp_path: Path, rule: str) -> None:
    relative, old, new = BAD_CASES[rule]
    assert old in GOOD
    write(tmp_path, relative, GOOD.replace(old, new))
    result = run_tool(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert reported_rules(result.stdout) == [rule], result.stdout


def test_syntax_proto2_is_reported(tmp_path: Path) -> None:
    write(tmp_path, "acme/v1/widget.proto", PROTO2)
    result = run_tool(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert reported_rules(result.stdout) == ["SYNTAX_PROTO3"]
    assert result.stdout.startswith(f"{tmp_path / 'acme/v1/widget.proto'}:2: ")


def test_report_gives_path_and_line(tmp_path: Path) -> None:
    text = GOOD.replace("string part_id = 1;", "string partId = 1;")
    path = write(tmp_path, "acme/v1/widget.proto", text)
    line = text.splitlines().index("    string partId = 1;") + 1
    result = run_tool(tmp_path)
    assert result.stdout.startswith(f"{path}:{line}: FIELD_LOWER_SNAKE_CASE: ")


def test_file_argument_finds_its_include_root(tmp_path: Path) -> None:
    path = write(tmp_path, "acme/v1/widget.proto", GOOD)
    result = run_tool(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_missing_target_is_an_error(tmp_path: Path) -> None:
    result = run_tool(tmp_path / "nope.proto")
    assert result.returncode == 2
    assert "no such file" in result.stderr


def test_default_run_lints_the_tensorflow_protos_too() -> None:
    proto_root = Path(__file__).resolve().parents[2] / "proto" / "ocf"
    expected = len(list((proto_root / "v1").glob("*.proto")))
    expected += len(list((proto_root / "tensorflow" / "v1").glob("*.proto")))
    result = run_tool()
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"{expected} files, ")
    assert len(list((proto_root / "tensorflow" / "v1").glob("*.proto"))) >= 3
