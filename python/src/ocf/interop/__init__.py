"""Every checkpoint format OCF reads, and converting between them.

One folder per format (``ocf/``, ``safetensors/``, ``npz/``, ``tensorflow/``,
``gguf/``, ``sharded_safetensors/``, ``orbax/``), each defining a
:class:`ocf.interop.base.Format`: how to tell its checkpoints, open one as an
:class:`ocf.format.source.Source`, convert it to OCF and back, and describe it
for ``ocf inspect`` and ``ocf verify``.
:mod:`ocf.interop.registry` lists them (and is what every entry point opens
checkpoints through); :mod:`ocf.interop.converting` runs ``ocf convert``.
"""
