"""The one place ``ocf.keras`` imports Keras, so a missing install gets a clear error.

Keras picks its backend (``KERAS_BACKEND``: tensorflow, jax or torch) when it
is first imported; ocf.keras works with whichever was chosen.
"""

from __future__ import annotations

try:
    import keras
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("ocf.keras needs Keras 3, which is not installed: "
                      "pip install 'ocf[keras]'") from exc

__all__ = ["keras"]
