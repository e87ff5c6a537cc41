"""ocf.testing.AdapterTests with what only this project's test setup has: the
session's S3-compatible server on loopback (conftest.py's ``s3_server``).

Each adapter's contract test (test_adapter_contract_*.py) subclasses
:class:`ProjectAdapterTests`; a framework missing skips its file alone.
"""

from __future__ import annotations

from s3server import S3Server

from ocf.interop.registry import open_checkpoint
from ocf.testing import AdapterTests


class ProjectAdapterTests(AdapterTests):
    """The public suite, and an adapter's save and load reaching an object store."""

    def test_save_file_and_load_file_reach_an_object_store_through_storage_options(
            self, s3_server: S3Server, s3_bucket: str) -> None:
        url = f"{s3_bucket}/flat.ocf"
        options = s3_server.storage_options
        self.module.save_file(self.framework_tensors(self.small()), url,
                              storage_options=options)
        with open_checkpoint(url, storage_options=options) as source:
            self.assert_same({key: source.read_tensor(key) for key in source}, self.small())
        self.assert_same(self.loaded(url, storage_options=options), self.small())

    def test_save_and_restore_reach_an_object_store_through_storage_options(
            self, s3_server: S3Server, s3_bucket: str) -> None:
        url = f"{s3_bucket}/state.ocf"
        options = s3_server.storage_options
        self.module.save(self.state_of(self.small()), url, storage_options=options)
        target = self.state_of(self.zeros())
        result = self.module.restore(target, url, storage_options=options)
        self.assert_same(self.arrays_of(self.restored(result, target)), self.small())
