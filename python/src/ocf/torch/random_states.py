"""The process-wide random generators a training run draws from, as one state dict.

Trainers shuffle with Python's ``random``, NumPy's global generator and
torch's default generator (and CUDA's, per device); a resume is bit for
bit only if all of them continue where they stopped. These two functions
take and set their states as a nested dict of tuples, arrays and tensors,
which :mod:`ocf.torch.state_trees` stores without pickle.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np

from ocf.format.errors import InvalidError
from ocf.torch._framework import torch


def global_random_states() -> dict[str, Any]:
    """The states of Python's, NumPy's, torch's (and, when present, CUDA's) generators."""
    states: dict[str, Any] = {"python": random.getstate(), "numpy": np.random.get_state(),
                              "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_global_random_states(states: Mapping[str, Any]) -> None:
    """Set the generators back to ``states`` (from :func:`global_random_states`).

    CUDA states are set when CUDA is available and the states hold them.
    A missing generator is INVALID, named, before any generator changes.
    """
    missing = [name for name in ("python", "numpy", "torch") if name not in states]
    if missing:
        raise InvalidError(f"the saved random states lack {', '.join(missing)}")
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
