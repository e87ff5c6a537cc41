"""Plain-text formatting shared by the commands of ocf.cli: sizes, numbers, tables."""

from __future__ import annotations

from collections.abc import Sequence


def format_size(n: int) -> str:
    """A byte count for people: ``512 B``, ``1.5 KiB``, ... up to GiB."""
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """``rows`` (the first one the header) as left-aligned columns two spaces apart."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def format_number(value: object) -> str:
    """A statistic for a table: integers whole, floats to 6 significant digits, "-" if none."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def shortened(text: str, width: int = 120) -> str:
    """``text`` cut to ``width`` characters, ending in "..." when cut."""
    return text if len(text) <= width else text[:width - 3] + "..."
