"""PyTorch, imported only when a PyTorch checkpoint is read or written.

``import ocf`` never imports torch: the PyTorch formats (``.pt`` files here,
DCP directories in ocf.interop.dcp) import it on first use, through
:func:`import_torch`, which turns a missing install into an OCF error naming
the checkpoint instead of an ImportError from deep inside a reader.
"""

from __future__ import annotations

import os
from types import ModuleType

from ocf.format.errors import InvalidError

INSTALL_HINT = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def import_torch(path: str | os.PathLike[str], what: str) -> ModuleType:
    """The torch module; InvalidError naming ``path`` when PyTorch is not installed.

    ``what`` says what needs it, for the message ("reading a PyTorch checkpoint").
    """
    try:
        import torch
    except ImportError:
        raise InvalidError(f"{what} needs PyTorch, which is not installed; OCF reads "
                           f"and writes PyTorch's formats through torch ({INSTALL_HINT})",
                           path=path) from None
    return torch


def import_dcp(path: str | os.PathLike[str], what: str) -> ModuleType:
    """torch, with ``torch.distributed.checkpoint`` imported; InvalidError naming
    ``path`` when PyTorch (or its distributed package) is not installed."""
    torch = import_torch(path, what)
    try:
        import torch.distributed.checkpoint
    except ImportError as exc:
        raise InvalidError(f"{what} needs torch.distributed.checkpoint, which this "
                           f"torch lacks ({exc})", path=path) from None
    return torch
