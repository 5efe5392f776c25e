"""The `fathom` command: a terminal agent built on the library (see `fathom.cli.main`).

Layer: cli, the top; it may import every layer below, and none imports it.
"""
