"""Loading a ``torch.save`` file with ``torch.load(weights_only=True)``, and nothing else.

Every file is hostile, and an unrestricted unpickle runs whatever code the
file names, so torch's loader runs only in its restricted mode
(``weights_only=True``: tensors, containers and plain values; no class the
file chooses), and only on a file that first passes these checks:

* it is a ZIP archive as ``torch.save`` has written since PyTorch 1.6, with
  one ``data.pkl``: the legacy format (a bare pickle) sizes its storages by
  what its pickle says, not by the bytes the file holds, so it is refused;
* it is not a TorchScript archive (``torch.jit.save``: ``code/`` and
  ``constants.pkl``), which torch.load would hand to the TorchScript loader.

The file is memory-mapped (``mmap=True``): tensors are views of its bytes,
so loading takes memory for the pickle and the Python objects only, not
for the values, and a storage cannot claim more bytes than the file holds.
What torch's loader raises on damaged or hostile bytes becomes an OCF
error naming the file: INVALID for objects ``weights_only`` refuses to build
(the message names their classes), MALFORMED for everything else.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from types import ModuleType

from ocf.format.errors import InvalidError, MalformedError
from ocf.format.memory import out_of_memory
from ocf.format.storage.local import open_regular
from ocf.interop.pytorch.torch_needed import import_torch

WHAT = "a PyTorch checkpoint (torch.save)"
_ZIP_MAGIC = b"PK\x03\x04"
_PICKLE_PROTOCOL = 0x80  # the first byte of a binary pickle: the legacy format
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, UnicodeDecodeError,
               NotImplementedError, ValueError)


def load(path: str) -> tuple[ModuleType, object]:
    """torch, and what ``torch.load(path, weights_only=True)`` returns for the checked
    file ``path``."""
    torch = import_torch(path, f"reading {WHAT}")
    check_archive(path)
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError as exc:
        raise _refused(torch, path, exc) from None
    except MemoryError:
        raise out_of_memory(os.path.getsize(path), "loading this checkpoint's pickle",
                            path=path) from None
    # torch's C++ reader and its restricted unpickler raise what they will on hostile
    # bytes (RuntimeError, KeyError, TypeError, struct.error, ...): all are MALFORMED.
    except Exception as exc:
        raise MalformedError(f"torch.load cannot read it: {first_line(exc)}",
                             path=path) from None
    return torch, loaded


def is_zip(path: str) -> bool:
    """Whether the file ``path`` starts as a ZIP archive (as torch.save's do)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == _ZIP_MAGIC
    except OSError:
        return False


def check_archive(path: str) -> None:
    """Refuse what is not a ``torch.save`` ZIP archive, naming what it is instead."""
    with open_regular(path, WHAT) as f:
        magic = f.read(4)
        if magic[:1] == bytes([_PICKLE_PROTOCOL]):
            raise InvalidError("the legacy torch.save format (a bare pickle, before "
                               "PyTorch 1.6) is not read: it sizes tensors by what its pickle "
                               "says, not by the file; load it with torch.load(path, "
                               "weights_only=True) and save it again with a current torch",
                               path=path)
        if magic != _ZIP_MAGIC:
            raise MalformedError("not a PyTorch checkpoint: torch.save writes a ZIP archive, "
                                 f"which starts with {_ZIP_MAGIC!r}, not {magic!r}", path=path)
        try:
            with zipfile.ZipFile(f) as archive:
                names = archive.namelist()
        except _ZIP_ERRORS as exc:
            raise MalformedError(f"not a readable ZIP archive: {exc}", path=path) from None
    if any(n.endswith("/constants.pkl") or "/code/" in n for n in names):
        raise InvalidError("a TorchScript archive (torch.jit.save) holds a program, not a "
                           "state dict; it is not read (save module.state_dict() with "
                           "torch.save instead)", path=path)
    pickles = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        raise MalformedError(f"a torch.save archive holds one <name>/data.pkl; this one holds "
                             f"{len(pickles)}", path=path)


def _refused(torch: ModuleType, path: str, exc: pickle.UnpicklingError) -> InvalidError:
    """What weights_only refused, as INVALID naming the classes the file asks for."""
    try:
        unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:
        unsafe = []
    if unsafe:
        what = f"Python objects of {', '.join(sorted(unsafe)[:10])}"
        return InvalidError(f"it holds {what}, which loading would have to run code for; "
                            "torch.load(weights_only=True) refuses them and OCF never "
                            "unpickles without it. Save the tensors and plain values only "
                            "(a state dict) to read it", path=path)
    return InvalidError(f"torch.load(weights_only=True) refuses it: {first_line(exc)}",
                        path=path)


def first_line(exc: BaseException) -> str:
    """The first line of what ``exc`` says, for a message (torch's run long)."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]
