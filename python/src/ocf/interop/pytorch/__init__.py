"""PyTorch ``torch.save`` files (``.pt``, ``.pth``, ``.bin``, Lightning's ``.ckpt``), read
only through ``torch.load(weights_only=True)`` (:mod:`.loading`), flattened to keys and
metadata (:mod:`.flatten`), read as a Source (:mod:`.source`) and converted
to OCF and back (:mod:`.convert`). Needs torch, imported on first use."""

from __future__ import annotations

from ocf.format.source import AnySource
from ocf.interop.base import LocalFormat
from ocf.interop.file_source import has_suffix
from ocf.interop.pytorch import convert
from ocf.interop.pytorch.flatten import UNREAD_KEY, VALUES_KEY
from ocf.interop.pytorch.loading import is_zip
from ocf.interop.pytorch.source import PyTorchSource
from ocf.interop.text import format_size, format_table, shortened


class PyTorchFormat(LocalFormat):
    """One ``torch.save`` ZIP archive; read with torch's restricted loader only."""

    name = "pytorch"
    title = "PyTorch"
    suffixes = (".pt", ".pth", ".bin")
    checks = "none: torch.load checks no checksums"
    checksums = False
    source = PyTorchSource
    converter = convert

    def detect(self, path: str) -> bool:
        if any(has_suffix(path, suffix) for suffix in self.suffixes):
            return True
        # Lightning names its torch.save files .ckpt, as TensorFlow names prefixes (whose
        # files end .index and .data-*): a .ckpt file is read if it is a ZIP archive.
        return has_suffix(path, ".ckpt") and is_zip(path)

    def overview(self, source: AnySource) -> list[str]:
        assert isinstance(source, PyTorchSource), "a .pt file opens as a PyTorchSource"
        flat = source.flat
        lines = [f"checkpoint: {source.path}",
                 f"PyTorch file (torch.save, read with weights_only=True), {len(source)} "
                 f"tensors, {len(flat.values)} plain values, {len(flat.unread)} entries not "
                 f"read, {format_size(source.identity[0])} (no checksums)"]
        lines += [f"{VALUES_KEY} {key} = {shortened(repr(value))}"
                  for key, value in flat.values.items()]
        lines += [f"{UNREAD_KEY} {key}: {what}" for key, what in flat.unread.items()]
        rows = [("KEY", "DTYPE", "SHAPE")]
        rows += [(key, view.dtype.name, str(list(view.shape))) for key, view in source.items()]
        return [*lines, format_table(rows)]


PYTORCH = PyTorchFormat()
