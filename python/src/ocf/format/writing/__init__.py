"""The parts of :class:`ocf.format.writer.Writer`: the checks that turn arrays into write
items (:mod:`.items`), the emitter that writes their bytes as blocks (:mod:`.blocks`),
and the committers that publish the checkpoint, one per layout (:mod:`.committers`)."""
