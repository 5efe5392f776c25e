"""`fathom.acp`: the public path of `fathom.protocols.acp` (see that package).

Kept so that `from fathom.acp import ...` and submodule paths such as `fathom.acp.<module>`
keep working (`fathom._aliases`). Owns nothing; imports only `fathom.protocols.acp`.
"""

from fathom.protocols.acp import (
    MODES,
    AcpOptions,
    FathomACPAgent,
    UnsupportedContentError,
    from_acp,
    serve_stdio,
    to_acp,
)

__all__ = [
    "MODES",
    "AcpOptions",
    "FathomACPAgent",
    "UnsupportedContentError",
    "from_acp",
    "serve_stdio",
    "to_acp",
]

__path__: list[str] = []  # a package whose submodules fathom._aliases finds
