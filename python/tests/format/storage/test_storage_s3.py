"""Checkpoints on an S3-compatible object store (spec/commit.md, "Object stores").

Everything runs against a real moto server on loopback (fixture ``s3_server``),
through s3fs and botocore as against AWS. Expected bytes come from the local
writer (the same checkpoint saved to disk), from hand-built files, or from
the arrays themselves; never from reading back through the code under test.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import INDEX_FILE_NAME, flip_bit
from repo_paths import TESTS_DIR
from s3server import S3Server, requests_since

import ocf

WRITE_ID = "0123456789abcdef"


def _values(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "dense/kernel": rng.standard_normal((300, 200)).astype(np.float32),
        "dense/bias": rng.standard_normal(200).astype(np.float64),
        "step": np.array(seed, dtype=np.int64),
        "names": np.array([b"alpha", b"", b"gamma"], dtype=object),
        "mask": rng.integers(0, 2, (17, 5)).astype(bool),
    }


def _assert_same(got: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert sorted(got) == sorted(expected)
    for key, array in expected.items():
        assert got[key].dtype == array.dtype, key
        assert got[key].shape == array.shape, key
        assert np.array_equal(got[key], array), key


def _names(server: S3Server, url: str) -> list[str]:
    """Names of every object below ``url``, relative to it, as the server lists them now."""
    prefix = url.removeprefix("s3://").rstrip("/")
    server.fs.invalidate_cache()  # s3fs caches listings; other processes write too
    return [name[len(prefix) + 1:] for name in server.fs.find(prefix)]


def _objects(server: S3Server, url: str) -> dict[str, bytes]:
    """Every object below ``url``: name relative to it -> bytes."""
    return {name: server.fs.cat_file(f"{url}/{name}") for name in _names(server, url)}


# -- saving and loading --------------------------------------------------------


def test_file_form_on_s3_is_the_same_bytes_as_on_disk(
        s3_server: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    values = _values()
    ocf.save_file(values, tmp_path / "model.ocf", metadata={"epoch": 3}, write_id=WRITE_ID)
    url = f"{s3_bucket}/models/model.ocf"
    ocf.save_file(values, url, metadata={"epoch": 3}, write_id=WRITE_ID,
                  storage_options=s3_server.storage_options)

    assert s3_server.fs.cat_file(url) == (tmp_path / "model.ocf").read_bytes()
    assert _objects(s3_server, f"{s3_bucket}/models") == {
        "model.ocf": (tmp_path / "model.ocf").read_bytes()}
    _assert_same(ocf.load_file(url, storage_options=s3_server.storage_options), values)


def test_directory_form_on_s3_holds_exactly_the_index_and_its_shards(
        s3_server: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    values = _values()
    local = tmp_path / "ckpt"
    options: dict[str, Any] = {"layout": "directory", "max_shard_size": 64 << 10,
                               "compression": "zstd", "chunk_size": 16 << 10,
                               "write_id": WRITE_ID}
    ocf.save_file(values, local, **options)
    url = f"{s3_bucket}/run/ckpt"
    ocf.save_file(values, url, storage_options=s3_server.storage_options, **options)

    on_disk = {p.name: p.read_bytes() for p in local.iterdir()}
    assert len(on_disk) > 2  # the index and several shards
    assert _objects(s3_server, url) == on_disk
    with ocf.open(url, storage_options=s3_server.storage_options) as reader:
        assert reader.metadata == {}
        _assert_same(reader.read_tensors(reader), values)
    with ocf.open(f"{url}/{INDEX_FILE_NAME}", storage_options=s3_server.storage_options) as r:
        _assert_same({k: r.get_tensor(k) for k in r}, values)


def test_overwrite_on_s3_commits_new_shards_then_deletes_the_old_ones(
        s3_server: S3Server, s3_bucket: str) -> None:
    url = f"{s3_bucket}/ckpt"
    opts = s3_server.storage_options
    ocf.save_file(_values(1), url, layout="directory", storage_options=opts,
                  write_id="1111111111111111")
    ocf.save_file(_values(2), url, layout="directory", storage_options=opts,
                  write_id="2222222222222222")

    assert sorted(_objects(s3_server, url)) == ["data-2222222222222222-00000.ocfd",
                                                  INDEX_FILE_NAME]
    _assert_same(ocf.load_file(url, storage_options=opts), _values(2))


def test_checkpoint_on_s3_needs_no_storage_options_when_fsspec_is_configured(
        s3_server: S3Server, s3_bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import fsspec.config

    # fsspec's own defaults (also set by FSSPEC_S3 in the environment).
    monkeypatch.setitem(fsspec.config.conf, "s3", s3_server.storage_options)
    model = ocf.Module()
    model.kernel = ocf.Variable(np.arange(12, dtype=np.float32).reshape(3, 4))
    path = ocf.Checkpoint(model=model).save(f"{s3_bucket}/train/ckpt", layout="directory")
    assert path == f"{s3_bucket}/train/ckpt-1"

    fresh = ocf.Module()
    fresh.kernel = ocf.Variable(np.zeros((3, 4), np.float32))
    ocf.Checkpoint(model=fresh).restore(path).assert_consumed()
    assert np.array_equal(fresh.kernel.value, np.arange(12, dtype=np.float32).reshape(3, 4))


def test_async_save_to_s3_commits_in_the_background(
        s3_server: S3Server, s3_bucket: str) -> None:
    values = _values(5)
    url = f"{s3_bucket}/async.ocf"
    handle = ocf.save_file(values, url, blocking=False,
                           storage_options=s3_server.storage_options)
    assert handle.wait(timeout=120) == url
    _assert_same(ocf.load_file(url, storage_options=s3_server.storage_options), values)


# -- restoring and loading by name ------------------------------------------------


def test_restore_saver_and_load_variable_take_storage_options(
        s3_server: S3Server, s3_bucket: str) -> None:
    """No fsspec configuration: only the storage_options given reach the server."""
    opts = s3_server.storage_options
    kernel = np.arange(12, dtype=np.float32).reshape(3, 4)
    model = ocf.Module()
    model.kernel = ocf.Variable(kernel.copy())
    path = ocf.Checkpoint(model=model).save(f"{s3_bucket}/run/ckpt", storage_options=opts)
    assert path == f"{s3_bucket}/run/ckpt-1"

    fresh = ocf.Module()
    fresh.kernel = ocf.Variable(np.zeros((3, 4), np.float32))
    ocf.Checkpoint(model=fresh).restore(path, storage_options=opts).assert_consumed()
    assert np.array_equal(fresh.kernel.value, kernel)
    bare = ocf.Module()
    bare.kernel = ocf.Variable(np.zeros((3, 4), np.float32))
    ocf.restore(bare, path, start="model", storage_options=opts).assert_consumed()
    assert np.array_equal(bare.kernel.value, kernel)

    assert ocf.list_variables(path, storage_options=opts) == [
        ("model/kernel/.value", "float32", (3, 4)), ("save_counter/.value", "int64", ())]
    assert np.array_equal(ocf.load_variable(path, "model/kernel/.value", storage_options=opts),
                          kernel)

    values = _values(3)
    url = f"{s3_bucket}/saver/model"
    assert ocf.Saver(values).save(url, global_step=7, storage_options=opts) == f"{url}-7"
    targets = {key: np.zeros_like(value) for key, value in values.items()}
    ocf.Saver(targets).restore(f"{url}-7", storage_options=opts)
    _assert_same(targets, values)
    with pytest.raises(ocf.NotFoundError, match="R-COMMIT-006"):
        ocf.Saver(targets).restore(f"{url}-8", storage_options=opts)


# -- reading only what is needed -------------------------------------------------


def test_get_slice_on_s3_fetches_only_the_chunks_holding_the_rows(
        s3_server: S3Server, s3_bucket: str) -> None:
    # 1024 rows of 1 KiB, chunks of 4 KiB: rows 8-11 are exactly chunk 2.
    table = np.arange(1024 * 256, dtype=np.float32).reshape(1024, 256)
    url = f"{s3_bucket}/table.ocf"
    ocf.save_file({"table": table}, url, chunk_size=4096,
                  storage_options=s3_server.storage_options)
    with ocf.open(url, storage_options=s3_server.storage_options) as reader:
        opened = reader.bytes_read
        rows = reader.get_slice("table", np.s_[8:12, 3:5])
        assert reader.bytes_read - opened == 4096
        assert np.array_equal(rows, table[8:12, 3:5])
        column = reader.get_slice("table", np.s_[1020:, 7])
        assert reader.bytes_read - opened == 2 * 4096
        assert np.array_equal(column, table[1020:, 7])


def test_get_slice_on_s3_reads_a_fraction_of_a_compressed_tensor(
        s3_server: S3Server, s3_bucket: str) -> None:
    table = np.random.default_rng(3).standard_normal((1024, 256)).astype(np.float32)
    url = f"{s3_bucket}/table-zstd"
    ocf.save_file({"table": table}, url, layout="directory", compression="zstd",
                  chunk_size=4096, storage_options=s3_server.storage_options)
    stored = sum(len(v) for k, v in _objects(s3_server, url).items() if k.endswith(".ocfd"))
    with ocf.open(url, storage_options=s3_server.storage_options) as reader:
        opened = reader.bytes_read
        assert np.array_equal(reader.get_slice("table", np.s_[8:12]), table[8:12])
        # One of 256 chunks: far less than a tenth of the stored bytes.
        assert 0 < reader.bytes_read - opened < stored / 10


# -- what readers see ----------------------------------------------------------


def test_shards_without_an_index_on_s3_are_no_checkpoint(
        s3_server: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    ocf.save_file(_values(), tmp_path / "ckpt", layout="directory")
    (shard,) = (p for p in (tmp_path / "ckpt").iterdir() if p.suffix == ".ocfd")
    s3_server.fs.pipe_file(f"{s3_bucket}/ckpt/{shard.name}", shard.read_bytes())

    for name in ("ckpt", "absent"):
        log_start = s3_server.log.stat().st_size
        with pytest.raises(ocf.NotFoundError) as caught:
            ocf.open(f"{s3_bucket}/{name}", storage_options=s3_server.storage_options)
        assert caught.value.requirement == "R-COMMIT-006"
        # The reader asked for exactly P and P/index.ocf, and never listed P/.
        assert requests_since(s3_server, log_start, 2) == [
            f"HEAD /{s3_bucket.removeprefix('s3://')}/{name}",
            f"HEAD /{s3_bucket.removeprefix('s3://')}/{name}/{INDEX_FILE_NAME}",
        ]


def test_flipped_bit_in_an_s3_shard_is_an_integrity_error(
        s3_server: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    url = f"{s3_bucket}/ckpt"
    ocf.save_file(_values(), url, layout="directory", storage_options=s3_server.storage_options)
    (shard,) = (k for k in _objects(s3_server, url) if k.endswith(".ocfd"))
    blob = s3_server.fs.cat_file(f"{url}/{shard}")
    s3_server.fs.pipe_file(f"{url}/{shard}", flip_bit(blob, 8 * 64 + 3))  # first tensor byte

    with ocf.open(url, storage_options=s3_server.storage_options) as reader, \
            pytest.raises(ocf.IntegrityError) as caught:
        reader.verify_all()
    assert caught.value.requirement == "R-CRC-001"
    assert caught.value.path == f"{url}/{INDEX_FILE_NAME}"


def test_truncated_s3_shard_is_malformed_and_damaged_index_is_integrity(
        s3_server: S3Server, s3_bucket: str) -> None:
    url = f"{s3_bucket}/ckpt"
    ocf.save_file(_values(), url, layout="directory", storage_options=s3_server.storage_options)
    objects = _objects(s3_server, url)
    (shard,) = (k for k in objects if k.endswith(".ocfd"))
    s3_server.fs.pipe_file(f"{url}/{shard}", objects[shard][:-64])
    with pytest.raises(ocf.MalformedError) as short:
        ocf.open(url, storage_options=s3_server.storage_options)
    assert short.value.requirement == "R-SHARD-002"

    index = objects[INDEX_FILE_NAME]
    s3_server.fs.pipe_file(f"{url}/{INDEX_FILE_NAME}", flip_bit(index, 8 * 70))
    with pytest.raises(ocf.IntegrityError) as damaged:
        ocf.open(url, storage_options=s3_server.storage_options)
    assert damaged.value.requirement == "R-FILE-006"


def test_writer_refuses_to_mix_the_forms_on_s3(s3_server: S3Server, s3_bucket: str) -> None:
    opts = s3_server.storage_options
    ocf.save_file(_values(), f"{s3_bucket}/one.ocf", storage_options=opts)
    ocf.save_file(_values(), f"{s3_bucket}/many", layout="directory", storage_options=opts)
    with pytest.raises(ocf.InvalidError, match="R-COMMIT-005"):
        ocf.save_file(_values(), f"{s3_bucket}/one.ocf", layout="directory", storage_options=opts)
    with pytest.raises(ocf.InvalidError, match="R-COMMIT-005"):
        ocf.save_file(_values(), f"{s3_bucket}/many", storage_options=opts)
    _assert_same(ocf.load_file(f"{s3_bucket}/one.ocf", storage_options=opts), _values())


def test_import_ocf_does_not_import_fsspec() -> None:
    code = "import sys, ocf; print('fsspec' in sys.modules, 's3fs' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["False", "False"]


# -- crashes -------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from helpers import big_values
    import ocf

    url, layout = sys.argv[2], sys.argv[3]
    arrays = big_values(7, count=8, elements=2 << 20)   # 8 tensors of 8 MiB
    print("ready", flush=True)
    ocf.save_file(arrays, url, layout=layout, max_shard_size=8 << 20,
                  metadata={"version": "new"})
    print("committed", flush=True)
""")


def _start_child(server: S3Server, url: str, layout: str) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(TESTS_DIR), url, layout],
                             stdout=subprocess.PIPE, text=True,
                             env={**os.environ, **server.env})
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    return child


def _wait_for(condition: Any, child: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert child.poll() is None, "the writer finished before the moment to kill it"
        assert time.monotonic() < deadline, "the moment to kill never came"
        time.sleep(0.005)


def _kill(child: subprocess.Popen[str]) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.stdout is not None
    child.stdout.close()


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_killed_upload_of_a_directory_leaves_the_previous_checkpoint(
        s3_server: S3Server, s3_bucket: str) -> None:
    url = f"{s3_bucket}/ckpt"
    opts = s3_server.storage_options
    old = _values(1)
    ocf.save_file(old, url, layout="directory", metadata={"version": "old"},
                  storage_options=opts)
    before = _objects(s3_server, url)

    child = _start_child(s3_server, url, "directory")
    # Killed once some of the new shards are uploaded, before the index.
    _wait_for(lambda: len(_names(s3_server, url)) >= len(before) + 2, child)
    _kill(child)

    after = _objects(s3_server, url)
    assert {k: after[k] for k in before} == before  # the old objects untouched
    assert all(k.startswith("data-") for k in set(after) - set(before))
    with ocf.open(url, storage_options=opts) as reader:
        assert reader.metadata == {"version": "old"}
        _assert_same(reader.read_tensors(reader), old)

    # The next save commits and removes what the killed one left.
    ocf.save_file(_values(2), url, layout="directory", storage_options=opts)
    remaining = _objects(s3_server, url)
    assert len(remaining) == 2
    assert not set(remaining) & (set(after) - {INDEX_FILE_NAME})


def _committed_old_model(server: S3Server, bucket_url: str) -> tuple[str, bytes]:
    """A single-file checkpoint "model.ocf" of version "old" in the bucket: its URL and bytes."""
    url = f"{bucket_url}/model.ocf"
    ocf.save_file(_values(1), url, metadata={"version": "old"},
                  storage_options=server.storage_options)
    return url, server.fs.cat_file(url)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_killed_multipart_upload_of_a_file_leaves_the_previous_object(
        s3_server: S3Server, s3_bucket: str) -> None:
    url, before = _committed_old_model(s3_server, s3_bucket)
    opts = s3_server.storage_options
    bucket = s3_bucket.removeprefix("s3://")

    child = _start_child(s3_server, url, "file")
    # 64 MiB go up in parts of 32 MiB: killed once the multipart upload has begun.
    _wait_for(lambda: bool(s3_server.fs.list_multipart_uploads(bucket)), child)
    _kill(child)

    assert s3_server.fs.cat_file(url) == before
    with ocf.open(url, storage_options=opts) as reader:
        assert reader.metadata == {"version": "old"}
        _assert_same(reader.read_tensors(reader), _values(1))


# -- writers dropped without commit() or abort() -------------------------------


def _pending_uploads(server: S3Server, bucket_url: str) -> list[Any]:
    return list(server.fs.list_multipart_uploads(bucket_url.removeprefix("s3://")))


@pytest.mark.parametrize("elements", [1000, 10 << 20], ids=["one-part", "multipart"])
def test_writer_dropped_mid_write_leaves_the_committed_object(
        s3_server: S3Server, s3_bucket: str, elements: int) -> None:
    url, before = _committed_old_model(s3_server, s3_bucket)
    opts = s3_server.storage_options

    def save_and_fail() -> None:
        writer = ocf.Writer(url, storage_options=opts)
        writer.write("big", np.arange(elements, dtype=np.uint32))  # 40 MiB: a part goes up
        raise RuntimeError("user code fails mid-save, outside a with block")

    with pytest.raises(RuntimeError):
        save_and_fail()
    gc.collect()  # the writer and its output are garbage now, in a reference cycle or not

    assert s3_server.fs.cat_file(url) == before
    assert _pending_uploads(s3_server, s3_bucket) == []  # aborted, not left to a lifecycle rule
    with ocf.open(url, storage_options=opts) as reader:
        assert reader.metadata == {"version": "old"}
        _assert_same(reader.read_tensors(reader), _values(1))


EXITING_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import ocf

    writer = ocf.Writer(sys.argv[1])   # a global: collected only at shutdown
    writer.write("big", np.arange(10 << 20, dtype=np.uint32))
    sys.exit(3)
""")


def test_writer_alive_at_interpreter_exit_leaves_the_committed_object(
        s3_server: S3Server, s3_bucket: str) -> None:
    url, before = _committed_old_model(s3_server, s3_bucket)
    opts = s3_server.storage_options

    child = subprocess.run([sys.executable, "-c", EXITING_CHILD, url], capture_output=True,
                           text=True, env={**os.environ, **s3_server.env}, timeout=60)
    assert child.returncode == 3, child.stderr

    assert s3_server.fs.cat_file(url) == before
    assert _pending_uploads(s3_server, s3_bucket) == []
    with ocf.open(url, storage_options=opts) as reader:
        assert reader.metadata == {"version": "old"}


# -- multipart uploads with several parts in flight ----------------------------


def test_part_sizes_follow_s3s_rules_and_reach_800_gib() -> None:
    from ocf.format.storage.multipart import part_size

    sizes = [part_size(n) for n in range(1, 10_001)]  # S3 takes 10,000 parts at most
    assert all(5 << 20 <= size <= 5 << 30 for size in sizes)
    assert sizes == sorted(sizes)
    assert sum(sizes) >= 800 << 30


def test_an_upload_whose_parts_fail_raises_and_publishes_nothing(
        s3_server: S3Server, s3_bucket: str) -> None:
    url, before = _committed_old_model(s3_server, s3_bucket)
    opts = s3_server.storage_options
    bucket = s3_bucket.removeprefix("s3://")

    writer = ocf.Writer(url, storage_options=opts)
    writer.write("first", np.arange(6 << 20, dtype=np.uint32))  # 24 MiB: a part goes up
    for upload in _pending_uploads(s3_server, s3_bucket):  # the store loses the upload
        s3_server.fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=upload["Key"],
                             UploadId=upload["UploadId"])

    def write_the_rest() -> None:
        writer.write("second", np.arange(10 << 20, dtype=np.uint32))
        writer.commit()

    # What the store answers for parts of an upload it no longer has: moto 500, S3 NoSuchUpload.
    with pytest.raises(OSError, match=r"Internal Server Error|NoSuchUpload|does not exist"):
        write_the_rest()
    writer.abort()

    assert s3_server.fs.cat_file(url) == before
    assert _pending_uploads(s3_server, s3_bucket) == []
