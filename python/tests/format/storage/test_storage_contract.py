"""ocf.testing.StorageTests over every storage backend: local files and S3.

The S3 backend runs against a real S3-compatible server on loopback (moto
through s3fs), reached through ``backend_of`` exactly as the reader, writer,
merge and manager reach it. What exists is checked through the store's own
listing (os or s3fs), never through the backend under test alone.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from s3server import S3Server

from ocf.format.storage.location import Location, locate
from ocf.testing import StoragePlace, StorageTests


class TestLocalStorage(StorageTests):
    def make_place(self, request: pytest.FixtureRequest, tmp_path: Path) -> StoragePlace:
        root = tmp_path / "store"
        root.mkdir()
        return StoragePlace(root, None, lambda p: os.path.lexists(os.fspath(p)))


class TestS3Storage(StorageTests):
    def make_place(self, request: pytest.FixtureRequest, tmp_path: Path) -> StoragePlace:
        server: S3Server = request.getfixturevalue("s3_server")
        bucket = server.new_bucket()
        root = locate(f"s3://{bucket}/store", server.storage_options)

        def present(path: Location) -> bool:
            key = os.fspath(path).removeprefix("s3://")
            server.fs.invalidate_cache()
            return bool(server.fs.exists(key))

        return StoragePlace(root, server.storage_options, present)
