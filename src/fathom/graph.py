"""`fathom.graph`: where `create_deep_agent` and the agent state live, under the module
name the Deep Agents package uses (`deepagents.graph`), so imports from it port unchanged.

Layer: agent; it must not import project, server, protocols or cli.
"""

from __future__ import annotations

import warnings

from langchain_core.language_models import BaseChatModel

from fathom.agent import create_deep_agent
from fathom.models import resolve_model
from fathom.state import DeepAgentState

__all__ = ["DeepAgentState", "create_deep_agent", "get_default_model"]


def get_default_model() -> BaseChatModel:
    """The model `create_deep_agent(model=None)` uses: the one `FATHOM_MODEL` names.

    Deprecated, as in the reference (which returns its hosted default instead): pass the
    model to `create_deep_agent` explicitly.

    Raises:
        ModelNotConfiguredError: `FATHOM_MODEL` is not set.
    """
    warnings.warn(
        "get_default_model() is deprecated: pass a model to create_deep_agent explicitly "
        "(a 'provider:model' string or a chat model). It returns the model FATHOM_MODEL names.",
        DeprecationWarning,
        stacklevel=2,
    )
    return resolve_model(None)
