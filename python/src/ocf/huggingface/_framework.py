"""The one place ``ocf.huggingface`` imports Transformers and Accelerate, so a
missing install gets a clear error."""

from __future__ import annotations

try:
    import accelerate
    import transformers
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("ocf.huggingface needs Transformers and Accelerate, which are not "
                      "installed: pip install 'ocf[huggingface]'") from exc

__all__ = ["accelerate", "transformers"]
