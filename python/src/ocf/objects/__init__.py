"""Layer 3, objects (spec/objects.md): the tracking protocol, saving and
restoring object graphs, Checkpoint, the name-based Saver, checkpoint
management and saves in the background. Built on the format core only.
"""
