"""The tensor types a GGUF file may name (ggml's ``ggml_type``), with their block layout.

Every type stores its elements in blocks along the innermost dimension: a
block of ``block_elements`` values takes ``block_bytes`` bytes. The plain
types (floats and integers) have blocks of one element and map to an OCF
dtype; the quantized ones (Q4_0, Q8_0, the K-quants, the IQ types, ...)
pack a block of 32 to 256 values with shared scales and have no OCF dtype:
OCF reports them by name and size but does not dequantize them. Numbers
absent from the table (types ggml removed, or added after this table) are
refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GGMLType:
    """One ``ggml_type``: its number in the file, its name, its block layout."""

    code: int
    name: str
    block_elements: int
    block_bytes: int
    ocf_dtype: str | None = None  # the OCF dtype of a plain type; None when quantized

    @property
    def quantized(self) -> bool:
        return self.ocf_dtype is None

    def nbytes(self, elements: int) -> int:
        """The bytes of ``elements`` values (a whole number of blocks)."""
        return elements // self.block_elements * self.block_bytes


def _plain(code: int, name: str, itemsize: int, ocf: str) -> GGMLType:
    return GGMLType(code, name, 1, itemsize, ocf)


TYPES: dict[int, GGMLType] = {t.code: t for t in (
    _plain(0, "F32", 4, "float32"),
    _plain(1, "F16", 2, "float16"),
    GGMLType(2, "Q4_0", 32, 18),
    GGMLType(3, "Q4_1", 32, 20),
    GGMLType(6, "Q5_0", 32, 22),
    GGMLType(7, "Q5_1", 32, 24),
    GGMLType(8, "Q8_0", 32, 34),
    GGMLType(9, "Q8_1", 32, 40),
    GGMLType(10, "Q2_K", 256, 84),
    GGMLType(11, "Q3_K", 256, 110),
    GGMLType(12, "Q4_K", 256, 144),
    GGMLType(13, "Q5_K", 256, 176),
    GGMLType(14, "Q6_K", 256, 210),
    GGMLType(15, "Q8_K", 256, 292),
    GGMLType(16, "IQ2_XXS", 256, 66),
    GGMLType(17, "IQ2_XS", 256, 74),
    GGMLType(18, "IQ3_XXS", 256, 98),
    GGMLType(19, "IQ1_S", 256, 50),
    GGMLType(20, "IQ4_NL", 32, 18),
    GGMLType(21, "IQ3_S", 256, 110),
    GGMLType(22, "IQ2_S", 256, 82),
    GGMLType(23, "IQ4_XS", 256, 136),
    _plain(24, "I8", 1, "int8"),
    _plain(25, "I16", 2, "int16"),
    _plain(26, "I32", 4, "int32"),
    _plain(27, "I64", 8, "int64"),
    _plain(28, "F64", 8, "float64"),
    GGMLType(29, "IQ1_M", 256, 56),
    _plain(30, "BF16", 2, "bfloat16"),
    GGMLType(34, "TQ1_0", 256, 54),
    GGMLType(35, "TQ2_0", 256, 66),
    GGMLType(39, "MXFP4", 32, 17),
)}
