"""The requests a save and a merge make on S3: each is a round trip the save waits for.

Counted in the log of a real moto server on loopback (fixture ``s3_server``):
small objects go out in one PUT (not a multipart upload of three requests),
a shard is opened by one ranged GET that also tells its size (not a HEAD and
a GET), and a merge deletes the part indexes in one batch request. The
checks these requests carry (length, preamble, atomic publication) are
pinned here too, on the one-request paths.
"""

from __future__ import annotations

import numpy as np
import pytest
from s3server import S3Server, requests_since

import ocf
from ocf.distributed.parts import Slice, merge_parts, write_part
from ocf.format.container import PREAMBLE
from ocf.format.storage.backend import backend_of
from ocf.format.storage.location import locate
from ocf.format.storage.multipart import PART_SIZE, MultipartUpload

SAVE = "00112233445566aa"


def _log_size(server: S3Server) -> int:
    return server.log.stat().st_size


def _pending_uploads(server: S3Server, bucket: str) -> list[object]:
    return list(server.fs.list_multipart_uploads(bucket))


def test_a_multi_writer_save_on_s3_sends_each_small_object_in_one_put(
        s3_server: S3Server, s3_bucket: str) -> None:
    url, options = f"{s3_bucket}/ckpt", s3_server.storage_options
    bucket = s3_bucket.removeprefix("s3://")
    full = np.arange(3 * 64 * 16, dtype=np.float32).reshape(3 * 64, 16)
    start = _log_size(s3_server)
    for part in range(3):
        rows = slice(64 * part, 64 * (part + 1))
        write_part(url, {"w": Slice(full[rows], (rows.start, 0), full.shape)}, part=part,
                   parts=3, save_id=SAVE, storage_options=options)
    merge_parts(url, save_id=SAVE, parts=3, storage_options=options)

    requests = requests_since(s3_server, start, 15)
    written = [r for r in requests if r.startswith(("PUT", "POST")) and ".ocf" in r]
    # Three shards, three part indexes, one index: one PUT each, no multipart upload.
    assert len(written) == 7
    assert all(r.startswith("PUT ") and "?" not in r for r in written)
    # The merge opens each shard with one ranged GET, never a HEAD first.
    assert not [r for r in requests if r.startswith("HEAD") and r.endswith(".ocfd")]
    assert len([r for r in requests if r.startswith("GET") and r.endswith(".ocfd")]) == 3
    # ... and deletes the three part indexes in one batch request.
    assert [r for r in requests if "delete" in r.lower()] == [f"POST /{bucket}?delete"]
    names = [n.rsplit("/", 1)[-1] for n in s3_server.fs.ls(f"{bucket}/ckpt", refresh=True)]
    assert not [n for n in names if n.startswith("part-")]
    with ocf.Reader(url, storage_options=options) as reader:
        assert reader.read_tensor("w").tobytes() == full.tobytes()


def test_an_object_larger_than_a_part_goes_up_as_one_multipart_upload(
        s3_server: S3Server, s3_bucket: str) -> None:
    url, options = f"{s3_bucket}/big.ocf", s3_server.storage_options
    big = np.arange(PART_SIZE // 4 + 1000, dtype=np.float32)  # one part and a bit more
    start = _log_size(s3_server)
    ocf.save_file({"big": big}, url, storage_options=options)

    requests = requests_since(s3_server, start, 4)
    key = f"/{s3_bucket.removeprefix('s3://')}/big.ocf"
    ours = [r for r in requests if r.split(" ")[1].split("?")[0] == key]
    assert len([r for r in ours if r.startswith("POST") and r.endswith("?uploads")]) == 1
    assert len([r for r in ours if r.startswith("PUT") and "partNumber=" in r]) == 2
    assert len([r for r in ours if r.startswith("POST") and "uploadId=" in r]) == 1
    assert not [r for r in ours if r == f"PUT {key}"]  # never a PUT of the whole object
    with ocf.open(url, storage_options=options) as reader:
        assert np.array_equal(reader.read_tensor("big"), big)


def test_a_small_upload_aborted_sends_nothing_and_never_completes(
        s3_server: S3Server, s3_bucket: str) -> None:
    bucket = s3_bucket.removeprefix("s3://")
    start = _log_size(s3_server)
    upload = MultipartUpload(s3_server.fs, f"{bucket}/small")
    upload.write(memoryview(b"x" * 1000))
    upload.abort()
    with pytest.raises(ValueError, match="aborted"):
        upload.complete()

    assert requests_since(s3_server, start, 0) == []
    assert not s3_server.fs.exists(f"{bucket}/small")
    assert _pending_uploads(s3_server, bucket) == []


def test_a_shard_opened_in_one_request_still_has_its_length_and_preamble_checked(
        s3_server: S3Server, s3_bucket: str) -> None:
    bucket = s3_bucket.removeprefix("s3://")
    root = locate(f"{s3_bucket}/shards", s3_server.storage_options)
    storage = backend_of(root)
    good = PREAMBLE + bytes(100)
    for name, data in (("good", good), ("short", PREAMBLE[:10]), ("empty", b""),
                       ("bad", b"X" * len(good))):
        s3_server.fs.pipe_file(f"{bucket}/shards/{name}", data)

    start = _log_size(s3_server)
    storage.open_shard(root / "good", len(good)).close()
    assert requests_since(s3_server, start, 1) == [f"GET /{bucket}/shards/good"]

    with pytest.raises(ocf.MalformedError, match="index says 99") as wrong:
        storage.open_shard(root / "good", 99)
    assert wrong.value.requirement == "R-SHARD-002"
    with pytest.raises(ocf.MalformedError, match="truncated"):
        storage.open_shard(root / "short", 10)  # the length the index says, no preamble
    with pytest.raises(ocf.MalformedError, match="truncated"):
        storage.open_shard(root / "empty", 0)  # S3 refuses any range of an empty object
    with pytest.raises(ocf.MalformedError):
        storage.open_shard(root / "bad", len(good))
    with pytest.raises(ocf.NotFoundError) as missing:
        storage.open_shard(root / "missing", len(good))
    assert missing.value.requirement == "R-SHARD-002"
