"""The OCF conformance suite's Python side: semantic descriptions of
checkpoints, the driver protocol, the reference adapter and the harness
(see conformance/README.md in the repository)."""
