"""zstd chunks decode within the raw length the index declares [R-CODEC-001].

A frame may omit its content size, so the only bound a reader has is the
chunk's raw length from the index: decoding must stop there, whatever the
frame would expand to. These tests run the decoder in a child process whose
address space is capped well below what the hostile frames expand to, so an
unbounded decode fails with MemoryError (or dies) instead of MALFORMED.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest
import zstandard

from ocf.format.codecs.zstd import ZSTD
from ocf.format.errors import MalformedError

_CAPPED_CHILD = textwrap.dedent("""
    import resource, sys, zstandard
    import ocf
    from ocf.format.codecs.zstd import ZSTD
    bomb = zstandard.ZstdCompressor(write_content_size=False).compress(b"\\0" * (1 << 30))
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[0])
    # Room for the interpreter as it is plus 256 MiB: far below the 1 GiB the frame holds.
    limit = pages * resource.getpagesize() + (256 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        ZSTD.decode(bomb, 4096, 1)
    except ocf.MalformedError as exc:
        print("MALFORMED", exc)
        sys.exit(0)
    except MemoryError:
        print("MemoryError")
        sys.exit(3)
    print("decoded")
    sys.exit(4)
""")


def test_frame_without_content_size_stops_at_declared_raw_length() -> None:
    result = subprocess.run([sys.executable, "-c", _CAPPED_CHILD], capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "R-CODEC-001" in result.stdout


def _frame(data: bytes, *, content_size: bool = False, checksum: bool = False) -> bytes:
    return zstandard.ZstdCompressor(write_content_size=content_size,
                                    write_checksum=checksum).compress(data)


@pytest.mark.parametrize("content_size", [False, True])
@pytest.mark.parametrize("checksum", [False, True])
def test_one_exact_frame_decodes(content_size: bool, checksum: bool) -> None:
    data = os.urandom(50_000) + b"a" * 200_000
    frame = _frame(data, content_size=content_size, checksum=checksum)
    assert bytes(ZSTD.decode(frame, len(data), 1)) == data


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda f: f + b"\0", "followed by extra bytes"),
    (lambda f: f + f, "followed by extra bytes"),
    (lambda f: f[:-1], "incomplete frame"),
    (lambda f: f[:8], "incomplete"),
    (lambda f: b"\0\0\0\0" + f[4:], "not a zstd frame"),
])
def test_anything_but_one_complete_frame_is_malformed(
    mutate: Callable[[bytes], bytes], message: str
) -> None:
    data = bytes(range(256)) * 400
    with pytest.raises(MalformedError, match=message):
        ZSTD.decode(mutate(_frame(data)), len(data), 1)


def test_frame_decoding_to_fewer_bytes_than_declared_is_malformed() -> None:
    with pytest.raises(MalformedError, match="decodes to 100 bytes"):
        ZSTD.decode(_frame(b"x" * 100), 4096, 1)
