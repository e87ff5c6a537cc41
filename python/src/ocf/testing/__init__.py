"""Contract test suites for code that extends OCF (needs pytest).

Like ``zarr.testing.StoreTests``: a subclass says how to make the thing
under test, and inherits every test of the contract it must keep.

- :class:`SourceTests` (:mod:`ocf.testing.sources`): a checkpoint format
  reads as the one interface ``ocf.open`` promises.
- :class:`StorageTests` (:mod:`ocf.testing.storage`): a storage backend
  behaves as the reader, writer, merge and manager need.

The project's own tests run them over every format and every backend
(tests/test_source_contract.py, tests/test_storage_contract.py).
"""

from __future__ import annotations

from ocf.testing.sources import SourceTests, sample_tensors
from ocf.testing.storage import StoragePlace, StorageTests

__all__ = ["SourceTests", "StoragePlace", "StorageTests", "sample_tensors"]
