"""Lint the .proto files the way `buf lint` would (we cannot ship buf here).

Run from anywhere:  python python/tools/lint_proto.py [ROOT_OR_FILE ...]
Without arguments it lints proto/ocf/v1/*.proto and proto/ocf/tensorflow/v1/*.proto
(OCF's declarations of TensorFlow's messages). A directory argument is an
include root whose *.proto files are all linted (recursively); a file argument
is linted alone, its include root worked out from its package statement.

Each file set is compiled with grpc_tools.protoc into a FileDescriptorSet with
source info; the checks read the descriptors and their source locations.
Every violation is printed as `path:line: RULE_NAME: message` and the exit
status is 1; a clean run prints one summary line and exits 0 (2: bad input).

Rules (modelled on buf's STANDARD and COMMENTS categories; the case
conversions are ports of buf's, so "DType" is "D_TYPE" in UPPER_SNAKE_CASE):

  PACKAGE_VERSION_SUFFIX       the package ends in a `.v<digits>` component
  PACKAGE_DIRECTORY_MATCH      the file sits in the directory of its package
                               (ocf.v1 -> <include root>/ocf/v1/)
  FILE_LOWER_SNAKE_CASE        the file name is lower_snake_case.proto
  SYNTAX_PROTO3                the file declares syntax = "proto3"
  MESSAGE_PASCAL_CASE          message names are PascalCase
  FIELD_LOWER_SNAKE_CASE       field names are lower_snake_case
  ENUM_PASCAL_CASE             enum names are PascalCase
  ENUM_VALUE_UPPER_SNAKE_CASE  enum value names are UPPER_SNAKE_CASE
  ENUM_VALUE_PREFIX            enum values start with the enum name in
                               UPPER_SNAKE_CASE plus "_" (Color -> COLOR_)
  ENUM_ZERO_VALUE_SUFFIX       the zero value is <PREFIX>_UNSPECIFIED (if the
                               value lacks the prefix, which ENUM_VALUE_PREFIX
                               reports, it must still end in _UNSPECIFIED)
  COMMENT_MESSAGE              every message has a non-empty leading comment
  COMMENT_FIELD                every field has a non-empty leading comment
  COMMENT_ENUM                 every enum has a non-empty leading comment
  COMMENT_ENUM_VALUE           every enum value has a non-empty leading comment
  COMMENT_ONEOF                every oneof has a non-empty leading comment
  REPEATED_FIELD_NAMES_PLURAL  repeated fields have names ending in "s"
                               (map fields are exempt: a map is not a list)

Synthetic elements are exempt from every rule: map-entry messages and their
key/value fields, and the oneofs protoc makes for proto3 `optional` fields.
Services and RPCs are not checked (the format defines none).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import descriptor_pb2 as pb
from grpc_tools import protoc  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[2]
PROTO_ROOT = ROOT / "proto"
DEFAULT_PACKAGE_DIRS = (PROTO_ROOT / "ocf" / "v1", PROTO_ROOT / "ocf" / "tensorflow" / "v1")
WELL_KNOWN_ROOT = Path(str(protoc.__file__)).with_name("_proto")

# Fully-qualified names ("ocf.v1.Message.field") of repeated fields allowed a
# singular name. Keep it empty unless a name truly cannot be pluralised, and
# give every entry a comment saying why.
PLURAL_EXCEPTIONS: frozenset[str] = frozenset(
    {
        # "children" is already plural (an English irregular plural).
        "ocf.v1.ObjectNode.children",
        # Same word, in TensorFlow's object graph (name kept from TensorFlow).
        "ocf.tensorflow.v1.TrackableObjectGraph.TrackableObject.children",
    }
)

# Field numbers in descriptor.proto, the steps of a source location path.
FILE_PACKAGE, FILE_MESSAGE, FILE_ENUM, FILE_EXTENSION, FILE_SYNTAX = 2, 4, 5, 7, 12
MESSAGE_FIELD, MESSAGE_NESTED, MESSAGE_ENUM = 2, 3, 4
MESSAGE_EXTENSION, MESSAGE_ONEOF = 6, 8
ENUM_VALUE = 2

DELIMITERS = frozenset(".-_ \t\n\r")
VERSION_RE = re.compile(r"v\d+")
PACKAGE_RE = re.compile(r"^\s*package\s+([\w.]+)\s*;", re.MULTILINE)

LocationPath = tuple[int, ...]


class LintError(Exception):
    """The input could not be linted at all (missing file, protoc error)."""


@dataclass(frozen=True, order=True)
class Violation:
    """One rule violation at one place."""

    path: str
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.rule}: {self.message}"


@dataclass
class FileContext:
    """One compiled file, its source locations and the violations found."""

    proto: pb.FileDescriptorProto
    display_path: str
    locations: dict[LocationPath, pb.SourceCodeInfo.Location]
    map_entries: set[str]
    violations: list[Violation] = field(default_factory=list)
    definitions: int = 0

    def line(self, path: LocationPath) -> int:
        location = self.locations.get(path)
        return location.span[0] + 1 if location is not None else 1

    def has_comment(self, path: LocationPath) -> bool:
        location = self.locations.get(path)
        return location is not None and location.leading_comments.strip() != ""

    def report(self, path: LocationPath, rule: str, message: str) -> None:
        violation = Violation(self.display_path, self.line(path), rule, message)
        self.violations.append(violation)


def qualify(scope: str, name: str) -> str:
    """The fully-qualified name, without a leading dot, of name in scope."""
    return f"{scope}.{name}" if scope else name


# Case conversions, ported from buf's private/pkg/stringutil.


def is_upper(char: str) -> bool:
    return "A" <= char <= "Z"


def starts_word(text: str, i: int, output: str) -> bool:
    """Whether text[i] (an upper-case letter) begins a new snake_case word."""
    if output.endswith("_"):
        return False
    nxt = text[i + 1] if i + 1 < len(text) else ""
    next_is_lower = nxt != "" and not (is_upper(nxt) or nxt.isdigit())
    return (next_is_lower and nxt not in DELIMITERS) or text[i - 1].islower()


def to_snake_case(name: str) -> str:
    text = name.strip("".join(DELIMITERS))
    output = ""
    for i, original in enumerate(text):
        char = "_" if original in DELIMITERS else original
        if i > 0 and is_upper(char) and starts_word(text, i, output):
            output += "_" + char
        elif not (char == "_" and output.endswith("_")):
            output += char
    return output


def to_lower_snake_case(name: str) -> str:
    return to_snake_case(name).lower()


def to_upper_snake_case(name: str) -> str:
    return to_snake_case(name).upper()


def to_pascal_case(name: str) -> str:
    output, previous = "", ""
    for i, char in enumerate(name.strip()):
        if char not in DELIMITERS:
            starts = i == 0 or previous in DELIMITERS or char.isupper()
            output += char.upper() if starts else char.lower()
        previous = char
    return output


# File-level rules.


def check_file(ctx: FileContext) -> None:
    check_syntax(ctx)
    check_package(ctx)
    check_file_name(ctx)


def check_syntax(ctx: FileContext) -> None:
    syntax = ctx.proto.syntax or "proto2"
    if syntax != "proto3":
        ctx.report(
            (FILE_SYNTAX,),
            "SYNTAX_PROTO3",
            f'File uses syntax "{syntax}"; use syntax = "proto3".',
        )


def check_package(ctx: FileContext) -> None:
    package = ctx.proto.package
    if not VERSION_RE.fullmatch(package.rsplit(".", 1)[-1]) or "." not in package:
        ctx.report(
            (FILE_PACKAGE,),
            "PACKAGE_VERSION_SUFFIX",
            f'Package "{package}" should end in a version component such as ".v1".',
        )
    directory = ctx.proto.name.rpartition("/")[0]
    expected = package.replace(".", "/")
    if directory != expected:
        ctx.report(
            (FILE_PACKAGE,),
            "PACKAGE_DIRECTORY_MATCH",
            f'File of package "{package}" should be in directory "{expected}" '
            f'of its include root, not "{directory}".',
        )


def check_file_name(ctx: FileContext) -> None:
    base = ctx.proto.name.rpartition("/")[2].removesuffix(".proto")
    expected = to_lower_snake_case(base)
    if base != expected:
        ctx.report(
            (FILE_PACKAGE,),
            "FILE_LOWER_SNAKE_CASE",
            f'File name "{base}.proto" should be lower_snake_case, such as "{expected}.proto".',
        )


# Messages, fields and oneofs.


def check_message(
    ctx: FileContext, message: pb.DescriptorProto, path: LocationPath, scope: str
) -> None:
    full_name = qualify(scope, message.name)
    if full_name in ctx.map_entries:
        return
    ctx.definitions += 1
    require_comment(ctx, path, "COMMENT_MESSAGE", f'Message "{full_name}"')
    expected = to_pascal_case(message.name)
    if message.name != expected:
        ctx.report(
            path,
            "MESSAGE_PASCAL_CASE",
            f'Message name "{message.name}" should be PascalCase, such as "{expected}".',
        )
    check_message_children(ctx, message, path, full_name)


def check_message_children(
    ctx: FileContext, message: pb.DescriptorProto, path: LocationPath, full_name: str
) -> None:
    for i, fld in enumerate(message.field):
        check_field(ctx, fld, (*path, MESSAGE_FIELD, i), full_name)
    for i, ext in enumerate(message.extension):
        check_field(ctx, ext, (*path, MESSAGE_EXTENSION, i), full_name)
    synthetic = synthetic_oneofs(message)
    for i, oneof in enumerate(message.oneof_decl):
        if i not in synthetic:
            check_oneof(ctx, oneof, (*path, MESSAGE_ONEOF, i), full_name)
    for i, nested in enumerate(message.nested_type):
        check_message(ctx, nested, (*path, MESSAGE_NESTED, i), full_name)
    for i, enum in enumerate(message.enum_type):
        check_enum(ctx, enum, (*path, MESSAGE_ENUM, i), full_name)


def synthetic_oneofs(message: pb.DescriptorProto) -> set[int]:
    """Indexes of the oneofs protoc generates for proto3 `optional` fields."""
    return {f.oneof_index for f in message.field if f.proto3_optional}


def check_field(
    ctx: FileContext, fld: pb.FieldDescriptorProto, path: LocationPath, scope: str
) -> None:
    ctx.definitions += 1
    full_name = qualify(scope, fld.name)
    if fld.type != pb.FieldDescriptorProto.TYPE_GROUP:
        require_comment(ctx, path, "COMMENT_FIELD", f'Field "{full_name}"')
    expected = to_lower_snake_case(fld.name)
    if fld.name != expected:
        ctx.report(
            path,
            "FIELD_LOWER_SNAKE_CASE",
            f'Field name "{fld.name}" should be lower_snake_case, such as "{expected}".',
        )
    check_plural(ctx, fld, path, full_name)


def check_plural(
    ctx: FileContext, fld: pb.FieldDescriptorProto, path: LocationPath, full_name: str
) -> None:
    if fld.label != pb.FieldDescriptorProto.LABEL_REPEATED:
        return
    if fld.type_name.lstrip(".") in ctx.map_entries or full_name in PLURAL_EXCEPTIONS:
        return
    if not fld.name.endswith("s"):
        ctx.report(
            path,
            "REPEATED_FIELD_NAMES_PLURAL",
            f'Repeated field "{full_name}" should have a plural name ending in "s".',
        )


def check_oneof(
    ctx: FileContext, oneof: pb.OneofDescriptorProto, path: LocationPath, scope: str
) -> None:
    ctx.definitions += 1
    require_comment(ctx, path, "COMMENT_ONEOF", f'Oneof "{qualify(scope, oneof.name)}"')


# Enums and enum values.


def check_enum(
    ctx: FileContext, enum: pb.EnumDescriptorProto, path: LocationPath, scope: str
) -> None:
    ctx.definitions += 1
    full_name = qualify(scope, enum.name)
    require_comment(ctx, path, "COMMENT_ENUM", f'Enum "{full_name}"')
    expected = to_pascal_case(enum.name)
    if enum.name != expected:
        ctx.report(
            path,
            "ENUM_PASCAL_CASE",
            f'Enum name "{enum.name}" should be PascalCase, such as "{expected}".',
        )
    prefix = to_upper_snake_case(enum.name) + "_"
    for i, value in enumerate(enum.value):
        check_enum_value(ctx, value, (*path, ENUM_VALUE, i), prefix)


def check_enum_value(
    ctx: FileContext,
    value: pb.EnumValueDescriptorProto,
    path: LocationPath,
    prefix: str,
) -> None:
    ctx.definitions += 1
    require_comment(ctx, path, "COMMENT_ENUM_VALUE", f'Enum value "{value.name}"')
    expected = to_upper_snake_case(value.name)
    if value.name != expected:
        ctx.report(
            path,
            "ENUM_VALUE_UPPER_SNAKE_CASE",
            f'Enum value name "{value.name}" should be UPPER_SNAKE_CASE, such as "{expected}".',
        )
    if not value.name.startswith(prefix):
        ctx.report(
            path,
            "ENUM_VALUE_PREFIX",
            f'Enum value name "{value.name}" should be prefixed with "{prefix}".',
        )
    if value.number == 0:
        check_zero_value(ctx, value.name, path, prefix)


def check_zero_value(ctx: FileContext, name: str, path: LocationPath, prefix: str) -> None:
    expected = prefix + "UNSPECIFIED"
    if name.startswith(prefix) and name != expected:
        message = f'Enum zero value "{name}" should be named "{expected}".'
    elif not name.startswith(prefix) and not name.endswith("_UNSPECIFIED"):
        message = f'Enum zero value "{name}" should be suffixed with "_UNSPECIFIED".'
    else:
        return
    ctx.report(path, "ENUM_ZERO_VALUE_SUFFIX", message)


def require_comment(ctx: FileContext, path: LocationPath, rule: str, what: str) -> None:
    if not ctx.has_comment(path):
        ctx.report(path, rule, f"{what} should have a non-empty leading comment.")


# Driving: locate files, compile them, run the checks.


def lint_file(proto: pb.FileDescriptorProto, root: Path) -> FileContext:
    ctx = FileContext(
        proto=proto,
        display_path=display(root / proto.name),
        locations={tuple(loc.path): loc for loc in proto.source_code_info.location},
        map_entries=map_entry_names(proto),
    )
    check_file(ctx)
    scope = proto.package
    for i, message in enumerate(proto.message_type):
        check_message(ctx, message, (FILE_MESSAGE, i), scope)
    for i, enum in enumerate(proto.enum_type):
        check_enum(ctx, enum, (FILE_ENUM, i), scope)
    for i, ext in enumerate(proto.extension):
        check_field(ctx, ext, (FILE_EXTENSION, i), scope)
    return ctx


def map_entry_names(proto: pb.FileDescriptorProto) -> set[str]:
    """Fully-qualified names (no leading dot) of the synthetic map entries."""
    names: set[str] = set()
    pending = [(proto.package, m) for m in proto.message_type]
    while pending:
        scope, message = pending.pop()
        full_name = qualify(scope, message.name)
        if message.options.map_entry:
            names.add(full_name)
        pending.extend((full_name, nested) for nested in message.nested_type)
    return names


def display(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def compile_files(root: Path, files: Sequence[Path]) -> pb.FileDescriptorSet:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "descriptors.pb"
        args = [
            "protoc",
            f"-I{root}",
            *([f"-I{WELL_KNOWN_ROOT}"] if WELL_KNOWN_ROOT.is_dir() else []),
            f"--descriptor_set_out={out}",
            "--include_source_info",
            *(str(f) for f in files),
        ]
        if protoc.main(args) != 0:
            raise LintError(f"protoc failed on the files under {root}")
        return pb.FileDescriptorSet.FromString(out.read_bytes())


def include_root(file: Path) -> Path:
    """The directory that holds the package path of a lone .proto file."""
    match = PACKAGE_RE.search(file.read_text(encoding="utf-8"))
    parts = tuple(match.group(1).split(".")) if match else ()
    parent = file.parent
    if parts and parent.parts[-len(parts) :] == parts:
        return Path(*parent.parts[: -len(parts)])
    return parent


def collect(targets: Sequence[Path]) -> dict[Path, list[Path]]:
    """Map each include root to the .proto files to lint under it."""
    if not targets:
        return {PROTO_ROOT: [p for d in DEFAULT_PACKAGE_DIRS for p in sorted(d.glob("*.proto"))]}
    groups: dict[Path, list[Path]] = {}
    for target in (t.resolve() for t in targets):
        if target.is_dir():
            groups.setdefault(target, []).extend(sorted(target.rglob("*.proto")))
        elif target.is_file():
            groups.setdefault(include_root(target), []).append(target)
        else:
            raise LintError(f"no such file or directory: {target}")
    return groups


def lint(targets: Sequence[Path]) -> tuple[int, int, list[Violation]]:
    """Lint the targets; return (files, definitions, violations)."""
    files = definitions = 0
    violations: list[Violation] = []
    for root, paths in collect(targets).items():
        if not paths:
            raise LintError(f"no .proto files under {root}")
        for proto in compile_files(root, sorted(set(paths))).file:
            ctx = lint_file(proto, root)
            files += 1
            definitions += ctx.definitions
            violations.extend(ctx.violations)
    return files, definitions, sorted(set(violations))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "targets",
        nargs="*",
        type=Path,
        help="include roots or .proto files (default: proto/ocf/v1/*.proto and "
        "proto/ocf/tensorflow/v1/*.proto)",
    )
    args = parser.parse_args(argv)
    try:
        files, definitions, violations = lint(args.targets)
    except LintError as error:
        print(f"lint_proto: {error}", file=sys.stderr)
        return 2
    for violation in violations:
        print(violation)
    if violations:
        return 1
    print(f"{files} files, {definitions} definitions checked, no problems")
    return 0


if __name__ == "__main__":
    sys.exit(main())
