"""An object's class recorded in its metadata, and the refusal to restore into another.

Optimizers and schedulers keep state whose meaning depends on their class:
Adam's first moment is not SGD's momentum buffer, a StepLR's ``step_size``
means nothing to a CosineAnnealingLR. Their adapters record the class as the
metadata entry ``class`` (a string, such as ``torch.optim.AdamW``) and refuse
a checkpoint object of another class before anything is restored, whatever
``partial`` and ``cast`` say. The node's ``type_name`` says the same, but
spec/objects.md keeps it informative: restoring never depends on it, so the
identity that restoring checks is state, in the metadata. Checkpoints that
recorded no class (written before it was) are not refused for lack of it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ocf.format.errors import InvalidError
from ocf.format.metadata import MetadataValue

CLASS = "class"


def refuse_other_class(values: Mapping[str, MetadataValue], own: str, kind: str,
                       detail: str = "") -> None:
    """INVALID when the checkpoint object's recorded class is not ``own``; ``kind``
    names what the object is ("an optimizer"), ``detail`` says more."""
    saved = values.get(CLASS)
    if isinstance(saved, str) and saved != own:
        raise InvalidError(f"the checkpoint holds a {saved}, this object is a {own}: "
                           f"{kind} restores only into its own class{detail}")
