"""Names of one meaning each (issue 23), and the old names still working (0.3.0)."""

from __future__ import annotations

import numpy as np

import ocf.distributed.parts
from ocf.format.index import model


def test_the_box_a_process_holds_is_not_named_like_a_stored_slice() -> None:
    box = ocf.distributed.parts.LocalBox(np.ones((2, 5)), start=(4, 0), shape=(8, 5))
    assert tuple(box.shape) == (8, 5)  # the global tensor's shape, not the box's
    assert ocf.distributed.parts.LocalBox is not model.Slice
    assert "LocalBox" in ocf.distributed.parts.__all__


def test_the_name_before_0_3_0_of_the_local_box_still_works() -> None:
    from ocf.distributed.parts import Slice
    assert Slice is ocf.distributed.parts.LocalBox
