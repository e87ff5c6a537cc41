"""Contract test suites for code that extends OCF (needs pytest).

Like ``zarr.testing.StoreTests``: a subclass says how to make the thing
under test, and inherits every test of the contract it must keep.

- :class:`SourceTests` (:mod:`ocf.testing.sources`): a checkpoint format
  reads as the one interface ``ocf.open`` promises.
- :class:`StorageTests` (:mod:`ocf.testing.storage`): a storage backend
  behaves as the reader, writer, merge and manager need.
- :class:`AdapterTests` (:mod:`ocf.testing.adapters`): a framework adapter
  (``ocf.numpy``, ``ocf.torch``, ``ocf.jax``, ``ocf.keras``) saves, loads and
  restores its framework's tensors as every adapter does.

The project's own tests run them over every format, every backend and
every adapter.
"""

from __future__ import annotations

from ocf.testing.adapters import ALL_DTYPES, AdapterTests, dtype_samples
from ocf.testing.sources import SourceTests, sample_tensors
from ocf.testing.storage import StoragePlace, StorageTests

__all__ = ["ALL_DTYPES", "AdapterTests", "SourceTests", "StoragePlace", "StorageTests",
           "dtype_samples", "sample_tensors"]
