"""Where checkpoints live: local files, and objects of stores reached through fsspec.

``ocf.save_file(tensors, "s3://bucket/ckpt", storage_options={...})`` and
every other path-taking function accept a URL of any fsspec filesystem;
``storage_options`` (endpoint_url, key, secret, ...) go to that filesystem,
and without them fsspec's defaults apply, ``FSSPEC_S3_*`` environment
variables included.

- :mod:`ocf.format.storage.backend`: the one interface (:class:`Backend`,
  :class:`Input`, :class:`Output`) and :func:`backend_of`;
- :mod:`ocf.format.storage.location`: which paths are URLs, :class:`ObjectPath`;
- :mod:`ocf.format.storage.local`: the backend of local files;
- :mod:`ocf.format.storage.object_store`: the backend of object stores, on
  :mod:`ocf.format.storage.reading` (ranged reads) and
  :mod:`ocf.format.storage.uploading` (uploads whose completion is the commit).
"""

from __future__ import annotations

from ocf.format.storage.location import EXTRA, ObjectPath, StorageOptions, locate, url_scheme

__all__ = ["EXTRA", "ObjectPath", "StorageOptions", "locate", "url_scheme"]
