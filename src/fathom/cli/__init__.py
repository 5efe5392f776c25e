"""The `fathom` command: a terminal agent built on the library (see `fathom.cli.main`)."""
