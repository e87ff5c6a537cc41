"""A Lightning ``CheckpointIO`` plugin that writes and reads OCF files."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ocf.lightning._framework import CheckpointIO, get_filesystem
from ocf.lightning.pooled_saves import PooledSaves
from ocf.torch._framework import torch
from ocf.torch.state_trees import load_tree, save_tree

# Entries of a Lightning checkpoint copied to the file's own metadata as well,
# so ``ocf inspect`` shows where in training a checkpoint was taken.
_SUMMARY = ("epoch", "global_step", "pytorch-lightning_version")


class OCFCheckpointIO(CheckpointIO):
    """Save and load Lightning checkpoints as single OCF files (atomic, CRC-checked).

    ``compression`` (``None`` or ``"zstd"``) and ``verify`` (checksum every
    chunk on load) are OCF's options; ``storage_options`` of a save go to
    fsspec for a URL path, as in :func:`ocf.save_file`. ``incremental=True``
    (local directories) writes into each directory's pool only the blocks
    whose bytes changed since the previous checkpoint there, and deletes the
    pool objects no checkpoint there lists any more after each save and each
    removal (:mod:`ocf.lightning.pooled_saves`).

    Examples:
        >>> trainer = Trainer(plugins=[OCFCheckpointIO(compression="zstd")])
        >>> trainer = Trainer(plugins=[AsyncCheckpointIO(OCFCheckpointIO())])
    """

    def __init__(self, *, compression: str | None = None, verify: bool = True,
                 incremental: bool = False) -> None:
        self.compression = compression
        self.verify = verify
        self._pooled = PooledSaves() if incremental else None

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike[str],
                        storage_options: Any | None = None) -> None:
        """Write ``checkpoint`` to ``path`` as one OCF file, replacing any file there."""
        summary = {key: checkpoint[key] for key in _SUMMARY
                   if isinstance(checkpoint.get(key), (int, str))}
        if self._pooled is None:
            _make_parent(path)
            save_tree(checkpoint, path, summary, compression=self.compression,
                      storage_options=storage_options)
            return
        with self._pooled.saving(path, storage_options) as base:  # refuses object stores
            _make_parent(path)
            save_tree(checkpoint, path, summary, compression=self.compression,
                      incremental=True, base=base)

    def load_checkpoint(self, path: str | os.PathLike[str], map_location: Any | None = None,
                        weights_only: bool | None = None) -> dict[str, Any]:
        """The checkpoint dict saved at ``path``, tensors placed by ``map_location``.

        ``map_location`` is a device, a dict mapping ``"cpu"`` to a device, or a
        function of (tensor, ``"cpu"``) as ``torch.load`` takes; None keeps them
        on the CPU. ``weights_only`` is accepted and has no effect: an OCF file
        holds no code, so loading one never runs any.
        """
        loaded = load_tree(path, device=_placement(map_location), verify=self.verify)
        if self._pooled is not None:
            self._pooled.loaded(path)
        if not isinstance(loaded, dict):
            raise TypeError(f"{path} holds a {type(loaded).__name__}, not a Lightning "
                            "checkpoint dict")
        return loaded

    def remove_checkpoint(self, path: str | os.PathLike[str]) -> None:
        """Delete the checkpoint at ``path`` (a file, or a directory checkpoint)."""
        filesystem = get_filesystem(os.fspath(path))

        def remove() -> None:
            if filesystem.exists(path):
                filesystem.rm(path, recursive=True)

        if self._pooled is None:
            remove()
        else:
            self._pooled.removing(path, remove)


def _make_parent(path: str | os.PathLike[str]) -> None:
    get_filesystem(os.fspath(path)).makedirs(os.path.dirname(path) or ".", exist_ok=True)


def _placement(map_location: Any) -> Any:
    """``map_location`` in ``ocf.torch.load_file``'s terms (a device or key, tensor function)."""
    if map_location is None:
        return "cpu"
    if isinstance(map_location, Mapping):
        return map_location.get("cpu", "cpu")
    if callable(map_location):
        def placed(key: str, tensor: torch.Tensor) -> torch.Tensor:
            moved = map_location(tensor, "cpu")
            return moved if isinstance(moved, torch.Tensor) else tensor
        return placed
    return map_location
