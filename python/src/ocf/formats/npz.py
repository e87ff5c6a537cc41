"""NumPy ``.npz`` archives to OCF checkpoints and back.

An ``.npz`` file is a ZIP archive with one ``.npy`` member per array, named
after the array (``np.savez``). Reading goes through the archive member by
member with NumPy's own header parser (never pickle: object arrays are
refused), and each member's declared shape and dtype are checked against
the member's stored size before anything is allocated, so a hostile header
cannot make the reader reserve memory the file does not back.

An npz file holds no metadata, so none is kept in either direction; OCF
metadata and an object graph are dropped with a warning on export. NumPy
has no built-in bfloat16 or float8 (np.save would keep them as untyped
bytes), and byte-string tensors need pickle; exporting them is refused.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from typing import IO, Any

import numpy as np

from ocf import dtypes
from ocf.errors import InvalidError, LimitExceededError, MalformedError
from ocf.formats.output import atomic_output, warn_dropped
from ocf.limits import MAX_ELEMENTS, MAX_RANK, MAX_TENSORS, nonzero_product
from ocf.reader import Reader
from ocf.writer import Writer

MEMBER_SUFFIX = ".npy"
# The OCF dtypes NumPy has built in; .npy files name only these.
NATIVE = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                    "uint64", "float16", "float32", "float64", "complex64", "complex128"})
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, NotImplementedError, EOFError)


def _read_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, path: str
                 ) -> np.ndarray:
    key = member.filename[: -len(MEMBER_SUFFIX)]
    with archive.open(member) as f:
        dtype, shape, fortran = _read_npy_header(f, path, key)
        size = int(np.prod(shape, dtype=object)) * dtype.itemsize
        data_length = member.file_size - f.tell()
        if size != data_length:
            raise MalformedError(f"the .npy header declares {size} bytes of {dtype} data of "
                                 f"shape {list(shape)}, the member holds {data_length}",
                                 path=path, key=key)
        data = f.read(size)
    if len(data) != size:
        raise MalformedError(f"member ends after {len(data)} of {size} bytes", path=path,
                             key=key)
    array = np.frombuffer(data, dtype=dtype)
    array = array.reshape(shape, order="F" if fortran else "C")
    # A new C-ordered little-endian array (ascontiguousarray would turn 0-d into 1-d).
    return array.astype(dtype.newbyteorder("<"), order="C")


def _read_npy_header(f: IO[bytes], path: str, key: str
                     ) -> tuple[np.dtype[Any], tuple[int, ...], bool]:
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:  # 3.0 exists only for structured dtypes with non-Latin-1 field names
            raise InvalidError(f".npy format version {version} is not supported (1.0 and "
                               "2.0 are)", path=path, key=key)
    except ValueError as exc:
        if isinstance(exc, InvalidError):
            raise
        raise MalformedError(f"not a valid .npy member: {exc}", path=path, key=key) from None
    if dtype.hasobject:
        raise InvalidError("object arrays need pickle to load, which OCF never uses "
                           "(np.load(..., allow_pickle=False) refuses them too)",
                           path=path, key=key)
    if dtype.names is not None or dtype.subdtype is not None:
        raise InvalidError(f"structured dtype {dtype} has no OCF equivalent", path=path,
                           key=key, requirement="R-DTYPE-001")
    if len(shape) > MAX_RANK or nonzero_product(shape) > MAX_ELEMENTS:
        raise LimitExceededError(f"shape {list(shape)} exceeds the limits of {MAX_RANK} "
                                 f"dimensions and {MAX_ELEMENTS} elements", path=path, key=key,
                                 requirement="R-TENSOR-003")
    if dtype.kind in "US" or dtype.itemsize == 0:
        raise InvalidError(f"NumPy dtype {dtype} (fixed-width text) has no OCF equivalent",
                           path=path, key=key, requirement="R-DTYPE-001")
    dtypes.for_array(np.empty(0, dtype))  # refuses dtypes OCF cannot store, naming them
    return dtype, shape, fortran


def _members(archive: zipfile.ZipFile, path: str) -> list[zipfile.ZipInfo]:
    members = archive.infolist()
    if len(members) > MAX_TENSORS:
        raise LimitExceededError(f"{len(members)} members exceed the limit of {MAX_TENSORS} "
                                 "tensors", path=path, requirement="R-LIMIT-001")
    seen: set[str] = set()
    for member in members:
        if not member.filename.endswith(MEMBER_SUFFIX):
            raise InvalidError(f"archive member {member.filename!r} is not a .npy array",
                               path=path)
        if member.filename in seen:
            raise MalformedError(f"archive holds member {member.filename!r} twice", path=path)
        seen.add(member.filename)
    return members


def to_ocf(src: str | os.PathLike[str], dst: str | os.PathLike[str], **options: Any) -> None:
    """Convert the ``.npz`` archive ``src`` into the OCF checkpoint ``dst``.

    ``options`` go to :class:`ocf.Writer` (layout, compression, ...).
    """
    path = os.fspath(src)
    try:
        with zipfile.ZipFile(path) as archive:
            members = _members(archive, path)
            with Writer(dst, **options) as writer:
                for member in members:
                    key = member.filename[: -len(MEMBER_SUFFIX)]
                    writer.write(key, _read_member(archive, member, path))
    except _ZIP_ERRORS as exc:
        raise MalformedError(f"not a readable .npz (ZIP) archive: {exc}", path=path) from None


def from_ocf(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
             compress: bool = False) -> None:
    """Write the tensors of the OCF checkpoint ``src`` as the ``.npz`` archive ``dst``.

    Members are stored uncompressed, as ``np.savez`` does, unless ``compress``.
    """
    with Reader(src) as reader:
        for key, info in reader.items():
            if info.dtype.name not in NATIVE:
                raise InvalidError(f"npz cannot store OCF {info.dtype.name} tensors (NumPy "
                                   "has no built-in type for them); convert to safetensors "
                                   "instead", path=reader.path, key=key)
        warn_dropped("metadata", reader.metadata, "npz")
        if reader.object_graph is not None:
            warn_dropped("an object graph", ["(object graph)"], "npz")
        method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
        with atomic_output(dst) as out, \
                zipfile.ZipFile(out, "w", compression=method, allowZip64=True) as archive:
            for key in reader:
                with archive.open(key + MEMBER_SUFFIX, "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, reader.read_tensor(key),
                                              allow_pickle=False)
