"""PyTorch Lightning writing and reading its checkpoints as OCF files.

:class:`OCFCheckpointIO` is a Lightning ``CheckpointIO`` plugin: every
checkpoint Lightning saves (``ModelCheckpoint``, ``trainer.save_checkpoint``)
becomes one OCF file, and ``trainer.fit(..., ckpt_path=...)`` resumes from
it. The whole checkpoint dict goes in (weights, optimizer and scheduler
states, loops, callbacks, hyperparameters, precision plugin state): tensors
as OCF tensors named by their path, the rest as typed metadata
(:mod:`ocf.torch.state_trees`); nothing is pickled, so a checkpoint from
anywhere can be opened without running its code. Lightning's
``AsyncCheckpointIO`` wraps it to save in a background thread.

Lightning keeps no random state in its checkpoints; :class:`RandomStates`,
a callback, adds Python's, NumPy's and torch's generators, so a resumed run
draws the shuffles and dropout masks an uninterrupted one would.

Examples:
    >>> from lightning.pytorch import Trainer
    >>> from ocf.lightning import OCFCheckpointIO, RandomStates
    >>> trainer = Trainer(plugins=[OCFCheckpointIO()], callbacks=[RandomStates()])

Needs the ``lightning`` extra: ``pip install 'ocf[lightning]'``.
"""

from __future__ import annotations

from ocf.lightning import _framework
from ocf.lightning.checkpoint_io import OCFCheckpointIO
from ocf.lightning.random_states import RandomStates

del _framework

__all__ = ["OCFCheckpointIO", "RandomStates"]
