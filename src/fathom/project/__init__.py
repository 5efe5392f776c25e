"""The project the `fathom` command works in: its config, the agent built from it, threads,
checkpoints, undo and the events a run streams, shared by the CLI, ACP and `fathom serve`.

Layer: project; it must not import server, protocols or cli.
"""
