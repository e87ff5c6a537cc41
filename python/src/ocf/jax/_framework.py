"""The one place ``ocf.jax`` imports JAX, so a missing install gets a clear error."""

from __future__ import annotations

try:
    import jax
    import jax.numpy as jnp
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("ocf.jax needs JAX, which is not installed: "
                      "pip install 'ocf[jax]'") from exc

__all__ = ["jax", "jnp"]
