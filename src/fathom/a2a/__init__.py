"""`fathom.a2a`: the public path of `fathom.protocols.a2a` (see that package).

Kept so that `from fathom.a2a import ...` and submodule paths such as `fathom.a2a.<module>`
keep working (`fathom._aliases`). Owns nothing; imports only `fathom.protocols.a2a`.

Layer: protocols; it must not import cli.
"""

from fathom.protocols.a2a import *  # noqa: F403  (re-exports the package's __all__)
from fathom.protocols.a2a import __all__ as __all__

__path__: list[str] = []  # a package whose submodules fathom._aliases finds
