"""Checkpoints on object stores through fsspec (spec/commit.md, "Object stores").

``ocf.save_file(tensors, "s3://bucket/ckpt", storage_options={...})`` and
every other path-taking function accept a URL of any fsspec filesystem;
``storage_options`` (endpoint_url, key, secret, ...) go to that filesystem,
and without them fsspec's defaults apply, ``FSSPEC_S3_*`` environment
variables included. Local paths never come here: they keep the memory
maps, preads, fsyncs and renames of the local code path.

- :mod:`ocf.format.storage.location`: which paths are URLs, :class:`ObjectPath`;
- :mod:`ocf.format.storage.reading`: opening a checkpoint and reading by ranges;
- :mod:`ocf.format.storage.uploading`: uploads whose completion is the commit,
  listing and deleting objects for cleanup.
"""

from __future__ import annotations

from ocf.format.storage.location import EXTRA, ObjectPath, StorageOptions, locate, url_scheme

__all__ = ["EXTRA", "ObjectPath", "StorageOptions", "locate", "url_scheme"]
