"""CheckpointManager and ocf.latest_checkpoint on an object store: a real moto S3
server on loopback (the ``s3_server`` fixture), including a manager killed with
SIGKILL while it saves.

See manager_support.py for ArrayCheckpoint, the small real ``Saveable`` the
test_manager_*.py files manage.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from manager_support import (
    SEED,
    TESTS_DIR,
    StoreCheckpoint,
    first_line,
    state_with,
    values_for,
)
from s3server import S3Server

import ocf
from ocf.format.container import INDEX_FILE_NAME
from ocf.objects.recovery import RecoveryWarning
from ocf.objects.state_file import (
    MAX_STATE_BYTES,
    STATE_FILE_NAME,
    read_state,
)


def _s3_names(server: S3Server, url: str) -> list[str]:
    """Every object below ``url``, relative to it, as the server lists them now."""
    prefix = url.removeprefix("s3://")
    server.fs.invalidate_cache()
    return sorted(name[len(prefix) + 1:] for name in server.fs.find(prefix))


def _s3_state(server: S3Server, url: str) -> dict[str, object]:
    document = json.loads(server.fs.cat_file(f"{url}/{STATE_FILE_NAME}"))
    assert isinstance(document, dict)
    return document


def _holds_numbers(arrays: dict[str, np.ndarray], number: int, size: int = 1024) -> None:
    expected = values_for(number, size)
    assert sorted(arrays) == sorted(expected)
    for key, array in expected.items():
        np.testing.assert_array_equal(arrays[key], array, err_msg=key)


def test_manager_on_s3_keeps_max_to_keep_and_deletes_whole_checkpoints(
        s3_server: S3Server, s3_bucket: str) -> None:
    url, opts = f"{s3_bucket}/run", s3_server.storage_options
    checkpoint = StoreCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, url + "/", max_to_keep=2, storage_options=opts)
    for number in (1, 10, 2):  # deleting ckpt-1 must leave its neighbour ckpt-10 whole
        checkpoint.arrays = values_for(number)
        assert manager.save(checkpoint_number=number) == f"{url}/ckpt-{number}"

    names_now = _s3_names(s3_server, url)
    assert [n for n in names_now if not n.startswith("ckpt-10/")
            and not n.startswith("ckpt-2/")] == [STATE_FILE_NAME]
    assert sorted(n.split("/")[1] for n in names_now if "/" in n).count(INDEX_FILE_NAME) == 2
    state = _s3_state(s3_server, url)
    assert (state["latest"], state["all"]) == ("ckpt-2", ["ckpt-10", "ckpt-2"])
    assert manager.checkpoints == [f"{url}/ckpt-10", f"{url}/ckpt-2"]

    assert ocf.latest_checkpoint(url, storage_options=opts) == f"{url}/ckpt-2"
    reopened = StoreCheckpoint()
    again = ocf.CheckpointManager(reopened, url, max_to_keep=2, storage_options=opts)
    assert again.checkpoints == manager.checkpoints
    assert again.restore_or_initialize() == f"{url}/ckpt-2"
    _holds_numbers(reopened.arrays, 2)
    with ocf.open(f"{url}/ckpt-10", storage_options=opts) as reader:
        _holds_numbers(reader.read_tensors(reader), 10)


def test_latest_checkpoint_on_s3_skips_a_latest_without_index(
        s3_server: S3Server, s3_bucket: str) -> None:
    url, opts = f"{s3_bucket}/run", s3_server.storage_options
    checkpoint = StoreCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, url, storage_options=opts)
    for _ in range(2):
        checkpoint.arrays = values_for(checkpoint.save_counter + 1)
        manager.save()
    s3_server.fs.rm_file(f"{url}/ckpt-2/{INDEX_FILE_NAME}".removeprefix("s3://"))
    assert ocf.latest_checkpoint(url, storage_options=opts) == f"{url}/ckpt-1"
    assert ocf.latest_checkpoint(f"{s3_bucket}/elsewhere", storage_options=opts) is None


def test_hostile_state_object_on_s3_is_refused(s3_server: S3Server, s3_bucket: str) -> None:
    url, opts = f"{s3_bucket}/run", s3_server.storage_options
    bucket_path = url.removeprefix("s3://")
    s3_server.fs.pipe_file(f"{bucket_path}/{STATE_FILE_NAME}", b"{" * (MAX_STATE_BYTES + 5))
    with pytest.raises(ocf.LimitExceededError, match=STATE_FILE_NAME):
        read_state(url, storage_options=opts)
    with pytest.warns(RecoveryWarning, match=f"damaged.*LIMIT_EXCEEDED: .*{STATE_FILE_NAME}"):
        assert ocf.latest_checkpoint(url, storage_options=opts) is None
    s3_server.fs.pipe_file(f"{bucket_path}/{STATE_FILE_NAME}", state_with(latest="../x"))
    with pytest.raises(ocf.InvalidError, match=r"s3://.*checkpoint\.json"):
        read_state(url, storage_options=opts)
    with pytest.warns(RecoveryWarning, match=r"damaged .*INVALID: s3://.*checkpoint\.json"):
        ocf.CheckpointManager(StoreCheckpoint(), url, storage_options=opts)
    s3_server.fs.rm_file(f"{bucket_path}/{STATE_FILE_NAME}")
    s3_server.fs.pipe_file(f"{bucket_path}/{STATE_FILE_NAME}/inside", b"x")
    with pytest.raises(ocf.InvalidError, match="prefix"):
        read_state(url, storage_options=opts)


def test_a_lost_state_object_on_s3_is_recovered_by_listing(
        s3_server: S3Server, s3_bucket: str) -> None:
    # Prefixes of the multi-file form (ckpt-1 to 3) and single objects (ckpt-4) alike.
    url, opts = f"{s3_bucket}/lost", s3_server.storage_options
    checkpoint = StoreCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, url, max_to_keep=3, storage_options=opts)
    for _ in range(3):
        checkpoint.arrays = values_for(checkpoint.save_counter + 1)
        manager.save()
    manager.close()
    ocf.save_file(values_for(4), f"{url}/ckpt-4", storage_options=opts,
                  metadata={"save_counter": 4})  # a single object
    s3_server.fs.pipe_file(f"{url.removeprefix('s3://')}/ckpt-9/data-0123456789abcdef-00000"
                           ".ocfd", b"\0" * 64)  # an upload killed before its index
    s3_server.fs.rm_file(f"{url.removeprefix('s3://')}/{STATE_FILE_NAME}")
    with pytest.warns(RecoveryWarning, match="found 4 committed checkpoint.*'ckpt-4'"):
        assert ocf.latest_checkpoint(url, storage_options=opts) == f"{url}/ckpt-4"
    with pytest.warns(RecoveryWarning):
        again = ocf.CheckpointManager(StoreCheckpoint(), url, storage_options=opts)
    assert again.latest_checkpoint == f"{url}/ckpt-4"
    assert [c.rsplit("/", 1)[-1] for c in again.checkpoints] == [
        "ckpt-1", "ckpt-2", "ckpt-3", "ckpt-4"]


def test_ocf_checkpoint_saved_by_a_manager_on_s3_in_the_background(
        s3_server: S3Server, s3_bucket: str) -> None:
    url, opts = f"{s3_bucket}/train", s3_server.storage_options
    variable = ocf.Variable(np.arange(64, dtype=np.float32))
    weights = variable.value
    manager = ocf.CheckpointManager(ocf.Checkpoint(model=variable), url,
                                    max_to_keep=1, storage_options=opts)
    for _ in range(2):
        weights += 1
        handle = manager.save(blocking=False)
        assert handle is not None
        weights += 100  # after the call: not saved
        assert handle.wait(120) == manager.latest_checkpoint
    assert manager.latest_checkpoint == f"{url}/ckpt-2"
    assert _s3_names(s3_server, url) == [STATE_FILE_NAME, "ckpt-2"]

    restored = ocf.Variable(np.zeros(64, dtype=np.float32))
    fresh = ocf.Checkpoint(model=restored)
    again = ocf.CheckpointManager(fresh, url, storage_options=opts)
    assert again.restore_or_initialize() == f"{url}/ckpt-2"
    np.testing.assert_array_equal(restored.value, np.arange(64, dtype=np.float32) + 102)
    assert fresh.save_counter == 2


S3_CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import ocf
    from manager_support import StoreCheckpoint, values_for

    url, count = sys.argv[2], int(sys.argv[3])
    checkpoint = StoreCheckpoint()
    manager = ocf.CheckpointManager(checkpoint, url, max_to_keep=1)  # FSSPEC_S3 points it
    manager.restore_or_initialize()
    print("ready", checkpoint.save_counter, flush=True)
    for _ in range(count):
        checkpoint.arrays = values_for(checkpoint.save_counter + 1)
        manager.save()
        print("saved", checkpoint.save_counter, flush=True)
""")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_of_a_manager_on_s3_never_loses_the_latest_checkpoint(
        s3_server: S3Server, s3_bucket: str) -> None:
    url, opts = f"{s3_bucket}/run", s3_server.storage_options
    rng = random.Random(SEED)
    print(f"seed {SEED} (OCF_MANAGER_SEED={SEED} replays it)")
    saved = latest = 0
    for kill in range(5):
        context = f"seed {SEED}, kill {kill}"
        child = subprocess.Popen([sys.executable, "-c", S3_CHILD, str(TESTS_DIR), url, "1000"],
                                 stdout=subprocess.PIPE, text=True,
                                 env={**os.environ, **s3_server.env})
        try:
            assert child.stdout is not None
            ready = first_line(child.stdout).split()
            assert ready == ["ready", str(latest)], context
            time.sleep(rng.uniform(0.05, 1.0))
            child.send_signal(signal.SIGKILL)
            out = child.communicate(timeout=30)[0]
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        numbers = [int(line.split()[1]) for line in out.splitlines() if line.startswith("saved")]
        saved = max([saved, *numbers])
        read_state(url, opts)  # whole and well formed
        found = ocf.latest_checkpoint(url, storage_options=opts)
        if found is None:
            assert saved == 0, context
            continue
        latest = int(found.rsplit("-", 1)[1])
        assert latest >= saved, f"{context}: latest {latest}, but save {saved} had returned"
        restored = StoreCheckpoint()
        restored.restore(found, opts)
        _holds_numbers(restored.arrays, latest)
        # max_to_keep=1: the latest, maybe one being deleted, maybe one not yet named.
        checkpoints = {n.split("/")[0] for n in _s3_names(s3_server, url) if "/" in n}
        assert len(checkpoints) <= 3, f"{context}: {sorted(checkpoints)}"
    assert latest > 0, f"seed {SEED}: no save finished"
