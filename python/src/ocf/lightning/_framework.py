"""The one place ``ocf.lightning`` imports Lightning, so a missing install gets a clear error."""

from __future__ import annotations

try:
    import lightning
    from lightning.fabric.plugins.io.checkpoint_io import CheckpointIO
    from lightning.fabric.utilities.cloud_io import get_filesystem
    from lightning.pytorch.callbacks import Callback
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("ocf.lightning needs Lightning (the `lightning` package), which is not "
                      "installed: pip install 'ocf[lightning]'") from exc

__all__ = ["Callback", "CheckpointIO", "get_filesystem", "lightning"]
