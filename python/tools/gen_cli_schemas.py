"""Write python/src/ocf/cli/schemas/format.schema.json from the format registry.

The ``format`` of every ``ocf ... --json`` document is one of the titles of
ocf.interop.registry.FORMATS (ocf.cli.format_schema); the command schemas
refer to this one file for them. Run it after adding a format.

Run from anywhere:  python python/tools/gen_cli_schemas.py
With --check it writes nothing and exits 1 if the committed file differs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ocf.cli.format_schema import FILE_NAME, rendered

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "src" / "ocf" / "cli" / "schemas" / FILE_NAME


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the committed file is not what the registry gives")
    args = parser.parse_args()
    text = rendered()
    if args.check:
        current = SCHEMA_FILE.read_text("utf-8") if SCHEMA_FILE.exists() else ""
        if current != text:
            print(f"{SCHEMA_FILE} is not what the format registry gives; run "
                  "python python/tools/gen_cli_schemas.py", file=sys.stderr)
            return 1
        return 0
    SCHEMA_FILE.write_text(text, "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
