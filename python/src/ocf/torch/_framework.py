"""The one place ``ocf.torch`` imports PyTorch, so a missing install gets a clear error."""

from __future__ import annotations

try:
    import torch
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("ocf.torch needs PyTorch, which is not installed: "
                      "pip install 'ocf[torch]'") from exc

__all__ = ["torch"]
