"""A Lightning callback that puts the random generators in every checkpoint."""

from __future__ import annotations

from typing import Any

from ocf.lightning._framework import Callback
from ocf.torch.random_states import global_random_states, set_global_random_states


class RandomStates(Callback):
    """Save and restore Python's, NumPy's and torch's global random generators.

    Lightning checkpoints keep no random state, so a resumed run would shuffle
    and drop out differently from an uninterrupted one. With this callback
    the checkpoint's ``callbacks`` entry holds the generators' states as they
    were at the save, and a resume sets them back before training goes on.
    CUDA generators are included when CUDA is available.

    Examples:
        >>> from lightning.pytorch import Trainer
        >>> from ocf.lightning import OCFCheckpointIO, RandomStates
        >>> trainer = Trainer(plugins=[OCFCheckpointIO()], callbacks=[RandomStates()])
        >>> trainer.fit(model, ckpt_path="last")  # resumes the generators too
    """

    def state_dict(self) -> dict[str, Any]:
        return global_random_states()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        set_global_random_states(state_dict)
