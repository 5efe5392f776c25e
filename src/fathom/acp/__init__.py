"""`fathom.acp`: the public path of `fathom.protocols.acp` (see that package).

Kept so that `from fathom.acp import ...` and submodule paths such as `fathom.acp.<module>`
keep working (`fathom._aliases`). Owns nothing; imports only `fathom.protocols.acp`.

Layer: protocols; it must not import cli.
"""

from fathom.protocols.acp import *  # noqa: F403  (re-exports the package's __all__)
from fathom.protocols.acp import __all__ as __all__

__path__: list[str] = []  # a package whose submodules fathom._aliases finds
