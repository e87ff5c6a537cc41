"""JSON Schemas of the output of `ocf COMMAND --json` (see ocf.cli.jsonout)."""
