"""The life of one rank process of the gloo tests: join the group, and leave it.

The worker scripts that tests/ranks.py starts call :func:`join` first and
:func:`leave` once their results are written. Leaving waits for every rank,
then ends the process at once, without tearing the group down: in torch's
gloo backend that teardown (the process group's destructor, or interpreter
finalization with the group's threads still holding tensors) now and then
calls ``std::terminate`` ("terminate called without an active exception"),
which turns a rank that did all its work into a failed one. It happened with
DCP's own reader as well as OCF's, so it is torch's, not the code under test;
what the tests check is in the files each rank wrote before it left.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from typing import NoReturn

import torch.distributed as dist


def join(timeout: float = 60.0) -> tuple[int, int]:
    """Join the gloo group that ranks.start describes; this rank and the world size."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=os.environ["OCF_TEST_INIT"], rank=rank,
                            world_size=world, timeout=timedelta(seconds=timeout))
    return rank, world


def leave() -> NoReturn:
    """End a rank whose work is done and written, exit code 0.

    The barrier keeps rank 0, which hosts the group's store, alive until every
    rank is done with the group. A rank whose work raised never gets here: its
    traceback and exit code are what the test reports.
    """
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
