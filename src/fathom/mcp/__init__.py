"""`fathom.mcp`: the public path of `fathom.protocols.mcp` (see that package).

Kept so that `from fathom.mcp import ...` and submodule paths such as `fathom.mcp.<module>`
keep working (`fathom._aliases`). Owns nothing; imports only `fathom.protocols.mcp`.

Layer: protocols; it must not import cli.
"""

from fathom.protocols.mcp import *  # noqa: F403  (re-exports the package's __all__)
from fathom.protocols.mcp import __all__ as __all__

__path__: list[str] = []  # a package whose submodules fathom._aliases finds
