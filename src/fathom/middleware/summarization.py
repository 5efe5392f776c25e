"""`fathom.middleware.summarization`: the path the Deep Agents API uses for summarization.

The code lives in `fathom.middleware.context.summarization`; this module re-exports its
public names so that `from deepagents.middleware.summarization import ...` ports by
changing the package name. Owns nothing.
"""

from fathom.middleware.context.summarization import *  # noqa: F403  (its __all__)
from fathom.middleware.context.summarization import __all__ as __all__
