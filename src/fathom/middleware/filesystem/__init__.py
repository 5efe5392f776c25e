"""The filesystem capability: the file tools and the words they answer with.

- `middleware`: `FilesystemMiddleware` and its tools (`ls`, `read_file`, `write_file`,
  `edit_file`, `delete`, `glob`, `grep`) over any backend, with the reference's public
  names (`*_TOOL_DESCRIPTION`, the tools' `*Schema`s, `GLOB_TIMEOUT`, ...);
- `answers`: every answer the model reads, success and error, written once from the
  backends' typed results (`BackendError` with an `ErrorKind`).

`fathom.middleware.filesystem` stands for the reference's `deepagents.middleware.filesystem`
module: its names are importable from here, and `GLOB_TIMEOUT` is read from here when a
`glob` runs. The `execute` tool and its names are `fathom.middleware.execute`'s.

Layer: capabilities. Imports the core and `fathom.backends`.
"""

from fathom.middleware.filesystem.middleware import *  # noqa: F403  (its __all__)
from fathom.middleware.filesystem.middleware import __all__ as __all__
