"""The checkpoint a DCP storage writer or reader works on, as DCP names it."""

from __future__ import annotations

import os


class CheckpointPath:
    """Holds ``path``, given at construction or by DCP's ``checkpoint_id``."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = None if path is None else os.fspath(path)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: str | os.PathLike[str]) -> bool:
        """Any path or URL may name an OCF checkpoint."""
        return isinstance(checkpoint_id, (str, os.PathLike))

    def take_checkpoint_id(self, checkpoint_id: str | os.PathLike[str] | None) -> None:
        """What ``reset(checkpoint_id)`` says: a new path, or the same one (None)."""
        if checkpoint_id is not None:
            self.path = os.fspath(checkpoint_id)
