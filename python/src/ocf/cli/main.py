"""The ``ocf`` command line: look inside checkpoints, compare, check and convert them.

    ocf inspect PATH [--tensor GLOB] [--all] [--stats] [--no-verify] [--json]
    ocf tree PATH [--max-lines N] [--json]
    ocf verify PATH [--json]
    ocf diff A B [--rtol R] [--atol A] [--json]
    ocf convert SRC DST [--to FORMAT] [--from FORMAT] [--layout L] [--compression C]
                [--chunk-size N]   (see ocf.interop.converting)
    ocf export SRC DST [--layout L]   (a standalone copy of one checkpoint, ocf.export)
    ocf conformance [--impl COMMAND] [...]   (see ocf.conformance.harness)

Every command reads every format OCF reads (ocf.interop.registry): OCF files
and directories, managed directories (their latest checkpoint), TensorFlow
prefixes and checkpoint directories, safetensors files, npz archives, GGUF
files, sharded safetensors models (model.safetensors.index.json) and Orbax
checkpoints (through orbax-checkpoint).
``--json`` output is described by the JSON Schemas in ocf/cli/schemas/.

Errors print as ``CATEGORY: file: detail [requirement]`` on stderr (and as
``{"error": ...}`` on stdout with ``--json``); the command exits with status
1, except ``diff``, which exits 0 when equal, 1 when different and 2 on
errors. Usage errors exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from ocf.cli.convert_command import convert, export_command
from ocf.cli.diff_command import ERROR as DIFF_ERROR
from ocf.cli.diff_command import diff
from ocf.cli.inspect_command import inspect
from ocf.cli.jsonout import emit, error_document
from ocf.cli.launch import version_line
from ocf.cli.report_command import report
from ocf.cli.tree import tree
from ocf.cli.verify_command import verify
from ocf.format.codecs.registry import CODECS
from ocf.format.errors import OCFError
from ocf.interop.registry import names as format_names

PATH_HELP = ("a checkpoint: OCF file or directory, managed directory, TensorFlow prefix or "
             "directory, .safetensors file, .npz archive, PyTorch .pt/.bin file, DCP "
             "directory, .gguf file, sharded safetensors directory, Orbax checkpoint directory")


def _tolerance(text: str) -> float:
    value = float(text)
    if not value >= 0 or value == float("inf"):  # also refuses NaN
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number >= 0")
    return value


def _json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="print one JSON document (schema: ocf/cli/schemas/)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ocf", description="Open Checkpoint Format tools")
    parser.add_argument("--version", action="version", version=version_line())
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("inspect", help="list tensors with dtype, shape, size and codec")
    p.add_argument("path", help=PATH_HELP)
    p.add_argument("--tensor", metavar="GLOB",
                   help="print the value of the tensors this key or glob (fnmatch) names")
    p.add_argument("--all", action="store_true", help="print the value of every tensor")
    p.add_argument("--stats", action="store_true",
                   help="min, max, mean, std and NaN/Inf/zero counts per tensor (with "
                   "--tensor: of those tensors only)")
    p.add_argument("--no-verify", action="store_true", help="skip checksum verification")
    _json_option(p)
    p.set_defaults(run=inspect)
    p = commands.add_parser("tree", help="draw the object graph: edges, slots, tensors")
    p.add_argument("path", help=PATH_HELP)
    p.add_argument("--max-lines", type=int, default=100_000, metavar="N",
                   help="draw at most N lines (default 100000)")
    _json_option(p)
    p.set_defaults(run=tree)
    p = commands.add_parser("verify", help="check structure and every checksum")
    p.add_argument("path", help=PATH_HELP)
    _json_option(p)
    p.set_defaults(run=verify)
    p = commands.add_parser(
        "diff", help="compare two checkpoints of any formats: keys, dtypes, shapes, values, "
        "metadata, object graphs; exit 0 equal, 1 different, 2 error")
    p.add_argument("a", help=PATH_HELP)
    p.add_argument("b", help="the checkpoint to compare it with, of any format")
    p.add_argument("--rtol", type=_tolerance, default=0.0, metavar="R",
                   help="relative tolerance: |a - b| <= atol + rtol * |b| is equal "
                   "(default 0: exact)")
    p.add_argument("--atol", type=_tolerance, default=0.0, metavar="A",
                   help="absolute tolerance (default 0: exact)")
    _json_option(p)
    p.set_defaults(run=diff, error_status=DIFF_ERROR)
    p = commands.add_parser("report", help="an HTML page of charts: sizes, values, norms")
    p.add_argument("path", help=PATH_HELP)
    p.add_argument("-o", "--output", required=True, help="the HTML file to write")
    p.add_argument("--histograms", type=int, default=8, metavar="N",
                   help="value histograms of the N largest tensors (default 8)")
    p.add_argument("--tensors", type=int, default=8, metavar="N",
                   help="for a managed directory: norms of the N largest tensors (default 8)")
    p.set_defaults(run=report)
    p = commands.add_parser("convert", help="convert to or from safetensors, npz and others")
    p.add_argument("src", help="the checkpoint to read; its format is detected")
    p.add_argument("dst", help="where to write; the format follows --to, else the suffix, "
                   "else OCF")
    known = ", ".join(format_names())
    p.add_argument("--to", metavar="FORMAT", help=f"the format to write: {known}")
    p.add_argument("--from", dest="source_format", metavar="FORMAT",
                   help=f"the format of SRC, when detection cannot tell: {known}")
    p.add_argument("--layout", choices=("file", "directory"),
                   help="OCF target: one file, or a directory of an index and shards")
    p.add_argument("--compression", choices=[codec.name for codec in CODECS],
                   help="OCF target: the codec")
    p.add_argument("--chunk-size", type=int, metavar="BYTES",
                   help="OCF target: bytes per checksummed chunk (a multiple of 64, "
                   "4096 to 1 GiB)")
    p.set_defaults(run=convert)
    p = commands.add_parser(
        "export", help="write one OCF checkpoint standalone, every byte in it (a checkpoint "
        "of an incremental save keeps its blocks in its directory's pool)")
    p.add_argument("src", help="the OCF checkpoint (file or directory)")
    p.add_argument("dst", help="where to write the standalone checkpoint")
    p.add_argument("--layout", choices=("file", "directory"), default="file",
                   help="one file (default), or a directory of an index and shards")
    p.set_defaults(run=export_command)
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
        if getattr(args, "json", False):
            emit(error_document(exc))
        print(exc, file=sys.stderr)
        return int(getattr(args, "error_status", 1))
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
