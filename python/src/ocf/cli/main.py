"""The ``ocf`` command line: look inside checkpoints and check them.

    ocf inspect PATH [--tensor KEY] [--all] [--no-verify]
    ocf tree PATH
    (inspect and tree also take a TensorFlow checkpoint prefix, see ocf.cli.tensorflow_view)
    ocf verify PATH
    ocf convert SRC DST [--to FORMAT] [--from FORMAT]   (see ocf.formats.registry)
    ocf conformance [--impl COMMAND] [...]   (see ocf.conformance.harness)

Errors print as ``CATEGORY: file: detail [requirement]`` on stderr, and the
command exits with status 1 (2 for usage errors).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence

import numpy as np

from ocf.cli.launch import version_line
from ocf.cli.managed import is_managed_directory, print_listing, resolved
from ocf.cli.safetensors_view import inspect_safetensors, is_safetensors, verify_safetensors
from ocf.cli.textformat import format_size, format_table
from ocf.format.errors import OCFError
from ocf.format.object_graph import Node, ObjectGraph, Origin
from ocf.format.reader import Reader
from ocf.formats.registry import names as format_names
from ocf.objects.sources import Source, open_source
from ocf.tensorflow.source import is_tensorflow_checkpoint


def inspect(args: argparse.Namespace) -> int:
    if is_managed_directory(args.path):
        args.path = print_listing(args.path)
    if is_safetensors(args.path):
        return inspect_safetensors(args.path, tensor=args.tensor, show_all=args.all)
    if is_tensorflow_checkpoint(args.path):
        from ocf.cli.tensorflow_view import inspect_tensorflow

        return inspect_tensorflow(args.path, tensor=args.tensor, show_all=args.all,
                                  verify=not args.no_verify)
    with Reader(args.path, verify=not args.no_verify) as reader:
        if args.tensor is not None:
            print(f"tensor_name: {args.tensor}")
            print(reader.get_tensor(args.tensor))
            return 0
        major, minor = reader.format_version
        print(f"checkpoint: {reader.path}")
        print(f"format {major}.{minor}, written by {reader.index.writer or 'unknown'}, "
              f"{len(reader)} tensors in {len(reader.index.shards)} shard(s)")
        for key, value in reader.metadata.items():
            print(f"metadata {key} = {value!r}")
        rows = [("KEY", "DTYPE", "SHAPE", "STORED", "CODEC")]
        for key, info in reader.items():
            sliced = f" ({len(info.slices)} slices)" if info.slices else ""
            rows.append((key, info.dtype.name, str(list(info.shape)),
                         format_size(info.stored_length), info.codec_name + sliced))
        print(format_table(rows))
        if args.all:
            for key in reader:
                print(f"\ntensor_name: {key}")
                print(reader.get_tensor(key))
    return 0


def tree(args: argparse.Namespace) -> int:
    reader = open_source(resolved(args.path), verify=False)  # OCF or TensorFlow
    try:
        graph = reader.object_graph
        if graph is None:
            print(f"{reader.path}: a name-based checkpoint (no object graph); "
                  f"{len(reader.keys())} tensors, see `ocf inspect`")
            return 0
        for line in draw_tree(graph, reader, max_lines=args.max_lines):
            print(line)
    finally:
        reader.close()
    return 0


# Levels of indentation drawn; deeper lines say their depth instead, so that a line
# costs at most this much however deep the graph (a hostile chain of 10^6 edges).
MAX_DRAWN_DEPTH = 64
# Characters of a path shown in a line (shared objects, slots); longer ones keep their end.
MAX_SHOWN_PATH = 160


def draw_tree(graph: ObjectGraph, reader: Source, *, max_lines: int | None = None
              ) -> Iterator[str]:
    """The lines drawing the object graph from the root, one at a time.

    Each node is drawn once, at its canonical path; other edges to it (shared
    objects, cycles) point there. Depth-first with an explicit stack of work
    (a line to print, or a node to expand), so deep graphs cannot exhaust
    Python's recursion limit; lines are produced as they are drawn and each
    is bounded (MAX_DRAWN_DEPTH, MAX_SHOWN_PATH), so memory stays linear in
    the graph. After ``max_lines`` lines, one more says the drawing stopped.
    """
    work: list[str | tuple[int, str, int]] = [
        (0, "", 0), f"(root) {graph.nodes[0].type_name}{_metadata(graph.nodes[0])}"]
    drawn = 0
    while work:
        item = work.pop()
        if isinstance(item, str):
            if max_lines is not None and drawn >= max_lines:
                yield f"... stopped after {max_lines} lines (ocf tree --max-lines N draws more)"
                return
            drawn += 1
            yield item
            continue
        work.extend(reversed(_lines_of(graph, reader, *item)))


def _lines_of(graph: ObjectGraph, reader: Source, node: int, indent: str, depth: int
              ) -> list[str | tuple[int, str, int]]:
    """The lines of ``node``'s entries, and the children to expand below them."""
    entries = _entries(graph, reader, node)
    marker = f"[depth {depth + 1}] " if depth >= MAX_DRAWN_DEPTH else ""
    todo: list[str | tuple[int, str, int]] = []
    for i, (label, child, drawn_here) in enumerate(entries):
        branch, deeper = ("└── ", "    ") if i == len(entries) - 1 else ("├── ", "│   ")
        line = f"{indent}{branch}{marker}{label}"
        if child is None:
            todo.append(line)
        elif not drawn_here:
            todo.append(f"{line} -> (shared: {graph.path_end(child, MAX_SHOWN_PATH)})")
        else:
            todo.append(f"{line}  {graph.nodes[child].type_name}{_metadata(graph.nodes[child])}")
            below = indent + deeper if depth < MAX_DRAWN_DEPTH else indent
            todo.append((child, below, depth + 1))
    return todo


def _entries(graph: ObjectGraph, reader: Source, node: int
             ) -> list[tuple[str, int | None, bool]]:
    """(label, child node or None, whether the child is drawn here) per line.

    A child is drawn under the entry its canonical path comes from (its
    origin); every other entry leading to it points there instead.
    """
    stored = graph.nodes[node]
    entries: list[tuple[str, int | None, bool]] = []
    for name, key in stored.attributes.items():
        info = reader.summary(key)
        entries.append((f".{name}: {info.dtype} {list(info.shape)}", None, False))
    for name, child_id in stored.children.items():
        entries.append((name, child_id, graph.origins[child_id] == Origin(node, name)))
    for slot in stored.slots:
        origin = Origin(node, slot.name, slot.variable)
        entries.append((f"slot {slot.name!r} of {graph.path_end(slot.variable, MAX_SHOWN_PATH)}",
                        slot.slot_node,
                        graph.origins[slot.slot_node] == origin))
    return entries


def _metadata(node: Node) -> str:
    if not node.metadata:
        return ""
    return "  {" + ", ".join(f"{k}: {v!r}" for k, v in node.metadata.items()) + "}"


def verify(args: argparse.Namespace) -> int:
    path = resolved(args.path)
    if is_safetensors(path):
        return verify_safetensors(path)
    if is_tensorflow_checkpoint(path):
        return _verify_foreign(path)
    with Reader(path) as reader:
        reader.verify_all()
        total = sum(info.stored_length for info in reader.values())
        print(f"OK: {reader.path}: {len(reader)} tensors, {format_size(total)} checked")
    return 0


def _verify_foreign(path: str) -> int:
    """Read every tensor of a checkpoint of another format, checking what it checksums."""
    source = open_source(path, verify=True)
    try:
        count = 0
        for key in source:
            source.read_tensor(key)
            count += 1
        print(f"OK: {source.path}: {count} tensors read and checked (TensorFlow checkpoint)")
    finally:
        source.close()
    return 0


def convert(args: argparse.Namespace) -> int:
    from ocf.formats.registry import convert as run  # formats load their modules lazily

    try:
        source, target = run(args.src, args.dst, to=args.to, source_format=args.source_format)
    except ImportError as exc:  # a format whose framework is not installed names its extra
        print(f"ocf convert: {exc}", file=sys.stderr)
        return 1
    print(f"converted {args.src} ({source}) -> {args.dst} ({target})")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ocf", description="Open Checkpoint Format tools")
    parser.add_argument("--version", action="version", version=version_line())
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("inspect", help="list tensors with dtype, shape, size and codec")
    p.add_argument("path", help="a checkpoint file, or a directory holding index.ocf")
    p.add_argument("--tensor", metavar="KEY", help="print the value of this tensor")
    p.add_argument("--all", action="store_true", help="print the value of every tensor")
    p.add_argument("--no-verify", action="store_true", help="skip checksum verification")
    p.set_defaults(run=inspect)
    p = commands.add_parser("tree", help="draw the object graph: edges, slots, tensors")
    p.add_argument("path", help="a checkpoint file, or a directory holding index.ocf")
    p.add_argument("--max-lines", type=int, default=100_000, metavar="N",
                   help="draw at most N lines (default 100000)")
    p.set_defaults(run=tree)
    p = commands.add_parser("verify", help="check structure and every checksum")
    p.add_argument("path", help="a checkpoint file, or a directory holding index.ocf")
    p.set_defaults(run=verify)
    p = commands.add_parser("convert", help="convert to or from safetensors, npz and others")
    p.add_argument("src", help="the checkpoint to read; its format is detected")
    p.add_argument("dst", help="where to write; the format follows --to, else the suffix, "
                   "else OCF")
    known = ", ".join(format_names())
    p.add_argument("--to", metavar="FORMAT", help=f"the format to write: {known}")
    p.add_argument("--from", dest="source_format", metavar="FORMAT",
                   help=f"the format of SRC, when detection cannot tell: {known}")
    p.set_defaults(run=convert)
    # Only listed here: main() hands its arguments to the harness's own parser.
    commands.add_parser("conformance", add_help=False,
                        help="run the conformance suite against an implementation")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["conformance"]:
        from ocf.conformance import harness  # imported only when needed

        return harness.main(argv[1:], prog="ocf conformance")
    args = _parser().parse_args(argv)
    try:
        with np.printoptions(linewidth=100):
            status: int = args.run(args)
            return status
    except OCFError as exc:
        print(exc, file=sys.stderr)
        return 1
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
