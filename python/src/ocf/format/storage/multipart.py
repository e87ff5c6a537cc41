"""S3 multipart uploads with several parts in flight.

fsspec's buffered S3 file sends the parts of an upload one after the other,
each only once the previous one is acknowledged, so a writer waits for a
whole round trip per part, and one object never uses more than one
connection. Here the parts of one object go out on a few threads while the
writer fills the next part: a save to S3 then moves at the speed of the
store, as a parallel upload of the same bytes does.

An object smaller than one part (a part index, a small shard) is sent in
one PUT when it is complete, not as a multipart upload of one part: one
request where the upload takes three (create, part, complete), each a
round trip the save waits for.

Nothing here changes the commit protocol (spec/commit.md, "Object
stores"): the object appears under its name only when the upload is
completed, or its one PUT is acknowledged, which only
:meth:`MultipartUpload.complete` does; both replace the object atomically.
An upload that is abandoned (an error, a writer dropped mid-write,
interpreter exit) is aborted by a finalizer, and no reader ever sees it
[R-COMMIT-005]; a small object abandoned before complete() was never sent.
"""

from __future__ import annotations

import io
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

#: Bytes of the first parts of an object. S3 takes parts of 5 MiB to 5 GiB,
#: at most 10,000 per object, every part but the last at least 5 MiB.
PART_SIZE = 16 << 20
#: Parts of one object being sent at once (each holds PART_SIZE bytes of memory).
IN_FLIGHT = 4
#: Every PART_GROWTH parts the part size grows by PART_SIZE, so that 10,000
#: parts hold 859 GiB while a small object still goes out in small parts.
PART_GROWTH = 1000


def part_size(number: int) -> int:
    """The size of part ``number`` (from 1) of an object: all but the last are this big."""
    return PART_SIZE * (1 + (number - 1) // PART_GROWTH)


class MultipartUpload:
    """One object being uploaded in parts, visible only once :meth:`complete` returns.

    ``fs`` is an s3fs filesystem (it has ``call_s3``); ``key`` the object's
    ``bucket/key`` path. :meth:`write` copies the bytes into the part being
    filled and sends full parts in the background (the multipart upload is
    created with the first); errors of a part surface in the next
    :meth:`write` or in :meth:`complete`.
    """

    def __init__(self, fs: Any, key: str) -> None:
        self._fs = fs
        self._bucket, self._key, _ = fs.split_path(key)
        self._upload_id: str | None = None  # created when the first part is sent
        self._pool: ThreadPoolExecutor | None = None
        self._sent: list[Future[dict[str, Any]]] = []
        self._acknowledged = 0  # parts known to be uploaded, in order
        self._buffer = io.BytesIO()  # a file: aiobotocore refuses large raw bodies
        self._done = False
        self._aborted = False  # by abort(): nothing may appear under the name any more
        self._abandon: weakref.finalize[Any, Any] | None = None

    def write(self, data: memoryview) -> None:
        """Append ``data`` (a 1-D byte view) to the object."""
        at = 0
        while at < data.nbytes:
            room = part_size(len(self._sent) + 1) - self._buffer.tell()
            self._buffer.write(data[at:at + room])
            at += room
            if self._buffer.tell() == part_size(len(self._sent) + 1):
                self._send()

    def complete(self) -> None:
        """Send the last part, wait for every part, and complete the upload: the
        commit point of the object. An object that never filled a part goes out in
        one PUT instead, as atomic as completing an upload."""
        if self._aborted:
            raise ValueError(f"the upload of {self._bucket}/{self._key} was aborted")
        if not self._sent:
            self._buffer.seek(0)
            self._fs.call_s3("put_object", Bucket=self._bucket, Key=self._key,
                             Body=self._buffer)
            self._done = True
            return
        if self._buffer.tell():
            self._send()
        parts = [sent.result() for sent in self._sent]
        self._fs.call_s3("complete_multipart_upload", Bucket=self._bucket, Key=self._key,
                         UploadId=self._upload_id, MultipartUpload={"Parts": parts})
        self._done = True
        if self._abandon is not None:  # always, once a part was sent
            self._abandon.detach()
        if self._pool is not None:
            self._pool.shutdown(wait=False)

    def abort(self) -> None:
        """Abandon the upload: nothing appears under the name."""
        if self._done:
            return
        self._aborted = True
        self._buffer = io.BytesIO()
        if self._abandon is not None:
            self._abandon()

    def _start(self) -> tuple[str, ThreadPoolExecutor]:
        """The multipart upload and its senders, created with the first part."""
        if self._upload_id is None or self._pool is None:
            created = self._fs.call_s3("create_multipart_upload", Bucket=self._bucket,
                                       Key=self._key)
            self._upload_id = str(created["UploadId"])
            self._pool = ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="ocf-upload")
            # Holds no reference to self: collecting an upload that never completed
            # aborts it, whatever happened to the writer [R-COMMIT-005].
            self._abandon = weakref.finalize(self, _abort, self._fs, self._bucket, self._key,
                                             self._upload_id, self._pool)
        return self._upload_id, self._pool

    def _send(self) -> None:
        """Send the part being filled, after waiting for the oldest part in flight
        when IN_FLIGHT are (which bounds the memory, and raises its error)."""
        # Parts before _acknowledged are done and were checked; the rest are in flight.
        while self._acknowledged < len(self._sent) and (
                len(self._sent) - self._acknowledged >= IN_FLIGHT
                or self._sent[self._acknowledged].done()):
            self._sent[self._acknowledged].result()  # a failed part fails this write
            self._acknowledged += 1
        upload_id, pool = self._start()
        number, body = len(self._sent) + 1, self._buffer
        body.seek(0)
        self._buffer = io.BytesIO()  # the part in flight keeps its own buffer
        # The job holds no reference to self either: an upload dropped with parts
        # in flight is collected, and aborted, at once.
        self._sent.append(pool.submit(_upload_part, self._fs, self._bucket, self._key,
                                      upload_id, number, body))


def _upload_part(fs: Any, bucket: str, key: str, upload_id: str, number: int,
                 body: io.BytesIO) -> dict[str, Any]:
    out = fs.call_s3("upload_part", Bucket=bucket, Key=key, UploadId=upload_id,
                     PartNumber=number, Body=body)
    return {"PartNumber": number, "ETag": out["ETag"]}


def _abort(fs: Any, bucket: str, key: str, upload_id: str, pool: ThreadPoolExecutor) -> None:
    """Abort an upload (a finalizer: never raises)."""
    try:
        pool.shutdown(wait=True, cancel_futures=True)
        fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload_id)
    except Exception:  # best effort: an unfinished upload is no object, and is billed
        pass  # only until a lifecycle rule reclaims it
