"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tf_support
from s3server import S3Server, serve
from samples import every_dtype


@pytest.fixture
def arrays() -> dict[str, np.ndarray]:
    return every_dtype()


@pytest.fixture(scope="session")
def tf_generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Checkpoints written by real TensorFlow (tf_support.py generate), once a session."""
    import tf_support

    out = tmp_path_factory.mktemp("tf_generated")
    tf_support.run("generate", str(out))
    return out


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real S3-compatible server (moto) on loopback for the whole session.

    ``.storage_options`` for ocf and fsspec in this process, ``.env`` for
    child processes (FSSPEC_S3 and AWS variables), ``.fs`` to look inside.
    """
    # Imported, not skipped: the test command installs both, and a missing one must fail.
    import moto.server  # noqa: F401
    import s3fs  # noqa: F401

    yield from serve(tmp_path_factory.mktemp("moto") / "moto.log")


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> str:
    """A new, empty bucket on the session's S3 server: its ``s3://`` URL."""
    return f"s3://{s3_server.new_bucket()}"


@pytest.fixture(scope="session")
def tf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """TensorFlow's own checkpoints (tf_support.GENERATED), read back by TensorFlow.

    Written once per session in the session's TensorFlow process, for the
    test_tf_bundle_*.py files that read them or compare with them.
    """
    out = tmp_path_factory.mktemp("tf_generated")
    tf_support.run("generate", str(out))
    return out
