"""The filesystem capability: the file tools and the words they answer with.

- `middleware`: `FilesystemMiddleware` and its tools (`ls`, `read_file`, `write_file`,
  `edit_file`, `delete`, `glob`, `grep`) over any backend;
- `answers`: every answer the model reads, success and error, written once from the
  backends' typed results (`BackendError` with an `ErrorKind`).

Layer: capabilities. Imports the core and `fathom.backends`.
"""

from fathom.middleware.filesystem.middleware import *  # noqa: F403  (its __all__)
from fathom.middleware.filesystem.middleware import __all__ as __all__
