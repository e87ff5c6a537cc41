"""What ``ocf report`` shows, computed from checkpoints: sizes by module,
per-tensor statistics and value histograms, and for a managed directory the
norm of every tensor and its change between consecutive checkpoints."""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from pathlib import Path

import numpy as np

from ocf.cli.managed import latest_of
from ocf.cli.stats import TensorStats, tensor_stats
from ocf.format.source import AnySource
from ocf.interop.registry import open_checkpoint
from ocf.objects.state_file import read_state

# Values a histogram is drawn from, at most (an even sample of larger tensors).
HISTOGRAM_SAMPLE = 1 << 20


@dataclass
class Snapshot:
    """One checkpoint: its tensors' sizes and statistics, and a histogram per tensor."""

    path: str
    sizes: dict[str, int] = field(default_factory=dict)  # key -> bytes of its values
    stats: dict[str, TensorStats] = field(default_factory=dict)
    histograms: dict[str, np.ndarray] = field(default_factory=dict)  # key -> sampled values


@dataclass
class History:
    """A managed directory's checkpoints in order: norms and changes per tensor."""

    names: list[str]
    norms: dict[str, list[float]]  # key -> its L2 norm in each checkpoint (NaN: absent)
    changes: dict[str, list[float]]  # key -> L2 norm of its change from the previous one


def is_numeric(source: AnySource, key: str) -> bool:
    numpy = source.summary(key).dtype.numpy
    return numpy is not None and numpy.kind in "biuf"


def snapshot(path: str, histograms: int) -> Snapshot:
    """Sizes and statistics of every tensor of ``path``; histograms of the largest ones."""
    with open_checkpoint(path) as source:
        taken = Snapshot(path=str(source.path))
        keys = source.keys()
        for key in keys:
            summary = source.summary(key)
            itemsize = 1 if summary.dtype.numpy is None else summary.dtype.numpy.itemsize
            taken.sizes[key] = prod(summary.shape) * itemsize
            taken.stats[key] = tensor_stats(source, key, lambda done: None)
        numeric = [key for key in keys if is_numeric(source, key)]
        for key in sorted(numeric, key=lambda k: -taken.sizes[k])[:histograms]:
            values = source.read_tensor(key).reshape(-1)
            step = max(1, values.size // HISTOGRAM_SAMPLE)
            sampled = values[::step].astype(np.float64)
            taken.histograms[key] = sampled[np.isfinite(sampled)]
    return taken


def module_of(key: str, depth: int = 2) -> str:
    """The module a tensor key belongs to: its first ``depth`` path parts, less a graph
    checkpoint's ``.value`` / ``.ATTRIBUTES`` ends."""
    parts = [p for p in key.replace(".", "/").split("/") if p and p not in ("value", "ATTRIBUTES")]
    return "/".join(parts[:depth]) or key


def sizes_by_module(sizes: dict[str, int]) -> dict[str, int]:
    grouped: dict[str, int] = {}
    for key, size in sizes.items():
        grouped[module_of(key)] = grouped.get(module_of(key), 0) + size
    return dict(sorted(grouped.items(), key=lambda item: -item[1]))


def history(directory: str, tensors: int) -> History:
    """Norms and changes over a managed directory's checkpoints, for its ``tensors`` largest."""
    state = read_state(directory)
    names = [] if state is None else list(state.names)
    paths = [str(Path(directory) / name) for name in names]
    with open_checkpoint(latest_of(directory)) as latest:
        latest_keys = latest.keys()
        numeric = [k for k in latest_keys if is_numeric(latest, k)]
        largest = sorted(numeric, key=lambda k: -prod(latest.summary(k).shape))[:tensors]
    norms: dict[str, list[float]] = {key: [] for key in largest}
    changes: dict[str, list[float]] = {key: [] for key in largest}
    previous: dict[str, np.ndarray] = {}
    for path in paths:
        with open_checkpoint(path) as source:
            present = set(source.keys())
            current = {key: source.read_tensor(key).astype(np.float64)
                       for key in largest if key in present}
        for key in largest:
            value, before = current.get(key), previous.get(key)
            norms[key].append(float(np.linalg.norm(value)) if value is not None else np.nan)
            changes[key].append(float(np.linalg.norm(value - before))
                                if value is not None and before is not None
                                and value.shape == before.shape else np.nan)
        previous = current
    return History(names=names, norms=norms, changes=changes)
