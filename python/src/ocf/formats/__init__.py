"""Converters between OCF and other checkpoint formats, one module per format.

Each module exposes ``to_ocf(src, dst)`` and ``from_ocf(src, dst)``;
:mod:`ocf.formats.registry` lists them and ``ocf convert`` runs them.
"""
