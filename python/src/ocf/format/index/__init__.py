"""The checkpoint index (spec/format.md, "The index"): its validated model,
its tensor and block tables, and its decoding.
"""
