"""The bundle reader and writer in one import (``from ocf.tensorflow.bundle import ...``)."""

from __future__ import annotations

from ocf.tensorflow.bundle_reader import BundleReader, is_tf_checkpoint
from ocf.tensorflow.bundle_writer import BundleWriter
from ocf.tensorflow.entries import BundleHeader, TFEntry
from ocf.tensorflow.state import read_checkpoint_state, write_checkpoint_state

__all__ = [
    "BundleHeader",
    "BundleReader",
    "BundleWriter",
    "TFEntry",
    "is_tf_checkpoint",
    "read_checkpoint_state",
    "write_checkpoint_state",
]
