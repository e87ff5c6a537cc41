"""``ocf report``'s page: one self-contained HTML file, charts drawn by matplotlib
as inline SVG, so it opens anywhere with no network and no script.

Charts: stored bytes by module (bars); a value histogram per large tensor;
for a managed directory, per-tensor norms and the norm of each tensor's
change from the previous checkpoint, over the checkpoints. A table lists
every tensor's statistics. Each chart is one ``<figure class="chart">``.
"""

from __future__ import annotations

import html
import io
from collections.abc import Callable
from typing import Any

from ocf.cli.report_data import History, Snapshot, sizes_by_module
from ocf.interop.text import format_size

try:
    import matplotlib
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("ocf report draws with matplotlib, which is not installed: "
                      "pip install 'ocf[report]'") from exc

matplotlib.use("Agg")  # no display: files only
from matplotlib import pyplot
from matplotlib.figure import Figure

_STYLE = """body{font-family:sans-serif;margin:2em;color:#222}
figure.chart{display:inline-block;margin:0 1em 1em 0;vertical-align:top}
figcaption{font-size:0.9em;color:#555}
table{border-collapse:collapse;font-size:0.85em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}
td:first-child,th:first-child{text-align:left}"""


def _svg(draw: Callable[[Figure], None], size: tuple[float, float] = (6.0, 3.5)) -> str:
    figure = pyplot.figure(figsize=size)
    try:
        draw(figure)
        figure.tight_layout()
        out = io.StringIO()
        figure.savefig(out, format="svg")
    finally:
        pyplot.close(figure)
    text = out.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and doctype: inline in HTML


def _chart(title: str, svg: str) -> str:
    return (f'<figure class="chart">{svg}<figcaption>{html.escape(title)}</figcaption>'
            "</figure>")


def _sizes_chart(sizes: dict[str, int]) -> str:
    grouped = list(sizes_by_module(sizes).items())[:20]

    def draw(figure: Figure) -> None:
        axes = figure.add_subplot()
        axes.barh([name for name, _ in grouped][::-1], [size for _, size in grouped][::-1])
        axes.set_xlabel("bytes")
    return _chart("Stored bytes by module (largest 20)",
                  _svg(draw, (7.0, max(2.5, 0.3 * len(grouped) + 1))))


def _histogram_chart(key: str, values: Any) -> str:
    def draw(figure: Figure) -> None:
        axes = figure.add_subplot()
        axes.hist(values, bins=50)
        axes.set_yscale("log")
        axes.set_title(key, fontsize=8)
    return _chart(f"Values of {key}", _svg(draw, (4.5, 3.0)))


def _over_steps_chart(title: str, names: list[str], series: dict[str, list[float]]) -> str:
    def draw(figure: Figure) -> None:
        axes = figure.add_subplot()
        for key, values in series.items():
            axes.plot(range(len(names)), values, marker="o", label=key)
        axes.set_xticks(range(len(names)), names, rotation=45, fontsize=7)
        axes.legend(fontsize=6)
    return _chart(title, _svg(draw, (7.0, 4.0)))


def _stats_table(taken: Snapshot) -> str:
    rows = ["<tr><th>tensor</th><th>size</th><th>min</th><th>max</th><th>mean</th>"
            "<th>std</th><th>NaN</th><th>Inf</th></tr>"]
    for key, stats in taken.stats.items():
        found = stats.as_dict()
        cells = [format_size(taken.sizes[key])] + [
            "" if found[name] is None else f"{found[name]:.6g}"
            for name in ("min", "max", "mean", "std", "nan", "inf")]
        rows.append(f"<tr><td>{html.escape(key)}</td>"
                    + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    return "<table>" + "".join(rows) + "</table>"


def page(taken: Snapshot, steps: History | None) -> str:
    """The whole report page for a checkpoint (and its directory's history)."""
    charts = [_sizes_chart(taken.sizes)]
    charts += [_histogram_chart(key, values) for key, values in taken.histograms.items()]
    if steps is not None and steps.names:
        charts.append(_over_steps_chart("L2 norm per tensor, over the checkpoints",
                                        steps.names, steps.norms))
        charts.append(_over_steps_chart("L2 norm of the change from the previous checkpoint",
                                        steps.names, steps.changes))
    title = f"OCF report: {html.escape(taken.path)}"
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
            f"<style>{_STYLE}</style></head><body><h1>{title}</h1>"
            f"<p>{len(taken.sizes)} tensors, {format_size(sum(taken.sizes.values()))}</p>"
            f'<section id="charts">{"".join(charts)}</section>'
            f"<h2>Statistics</h2>{_stats_table(taken)}</body></html>")
