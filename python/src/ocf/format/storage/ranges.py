"""One ranged GET that also tells the object's size (S3's Content-Range).

Opening an object as a reader does (an index: its tail; a shard: its
preamble, and its length against the index's) takes a HEAD for the size,
then a GET for the bytes: two round trips. S3 answers a ranged GET with
``Content-Range: bytes <first>-<last>/<size>``, so one request gives both.
A merge of ``n`` parts opens ``n`` part indexes and every shard they name,
one after the other: this halves the requests it waits for.

Only s3fs filesystems are asked this way; anything else, and any answer
that does not state a size consistent with the bytes returned (a store
that ignores ranges, an empty object, whose every range S3 refuses), gives
None, and the caller asks with a HEAD as before.
"""

from __future__ import annotations

import re
from typing import Any

from ocf.format.errors import NotFoundError
from ocf.format.storage.location import ObjectPath, is_s3

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")
_SUFFIX = re.compile(r"bytes=-(\d+)")
_SPAN = re.compile(r"bytes=(\d+)-(\d+)")


def get_with_size(path: ObjectPath, byte_range: str, requirement: str
                  ) -> tuple[bytes, int] | None:
    """The bytes of ``byte_range`` (``bytes=<first>-<last>`` or ``bytes=-<count>``, the
    last ``count`` bytes) of the object at ``path``, and the object's size; None when the
    store does not answer both in one request. NotFoundError (citing ``requirement``) if
    there is no object."""
    fs = path.fs
    if not is_s3(fs):
        return None
    from fsspec.asyn import sync

    bucket, key, version_id = fs.split_path(path.key)
    version = {"VersionId": version_id} if version_id else {}
    try:
        data, content_range = sync(fs.loop, _ranged_get, fs, bucket, key, version, byte_range)
    except FileNotFoundError:
        raise NotFoundError("no object under this name", path=path,
                            requirement=requirement) from None
    except Exception:  # a refused range, a dropped connection: the two requests that
        return None  # s3fs retries answer instead, or raise their own error
    return _checked(data, content_range, byte_range)


async def _ranged_get(fs: Any, bucket: str, key: str, version: dict[str, str],
                      byte_range: str) -> tuple[bytes, str | None]:
    response = await fs._call_s3("get_object", fs.kwargs, Bucket=bucket, Key=key,
                                 Range=byte_range, **version)
    body = response["Body"]
    try:
        data = await body.read()
    finally:
        body.close()
    return bytes(data), response.get("ContentRange")


def _checked(data: bytes, content_range: str | None, byte_range: str
             ) -> tuple[bytes, int] | None:
    """``data`` and the size, if the Content-Range states the range asked for, as S3
    clips it to the object, and ``data`` is exactly that range."""
    match = _CONTENT_RANGE.fullmatch(content_range or "")
    if match is None:
        return None
    first, last, size = (int(g) for g in match.groups())
    suffix, span = _SUFFIX.fullmatch(byte_range), _SPAN.fullmatch(byte_range)
    if suffix is not None:
        expected = (max(0, size - int(suffix.group(1))), size - 1)
    elif span is not None:
        expected = (int(span.group(1)), min(int(span.group(2)), size - 1))
    else:
        return None
    if (first, last) != expected or len(data) != last - first + 1:
        return None
    return data, size
