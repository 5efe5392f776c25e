"""Model resolution: `"provider:model"` strings, instances, and the `FATHOM_MODEL` default.

Layer: foundation; it must not import capabilities, agent, project, server, protocols or cli.
"""

from __future__ import annotations

import os

from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel

from fathom.errors import FathomError

__all__ = ["MODEL_ENV_VAR", "ModelNotConfiguredError", "resolve_model"]

MODEL_ENV_VAR = "FATHOM_MODEL"


class ModelNotConfiguredError(FathomError, ValueError):
    """No model was given and none is configured."""


def resolve_model(model: str | BaseChatModel | None) -> BaseChatModel:
    """Turn the `model` argument of `create_deep_agent` into a chat model.

    A chat model instance is used as is. A string such as `"openai:gpt-4.1"` or
    `"anthropic:claude-sonnet-4-5"` goes through LangChain's `init_chat_model`. `None` reads
    the string from the `FATHOM_MODEL` environment variable.

    Raises:
        ModelNotConfiguredError: `model` is `None` and `FATHOM_MODEL` is unset.
        ValueError: the string names an unknown provider.
        ImportError: the provider's LangChain package is not installed.
    """
    if isinstance(model, BaseChatModel):
        return model
    if model is None:
        model = os.environ.get(MODEL_ENV_VAR, "").strip()
        if not model:
            raise ModelNotConfiguredError(
                "No model given. Pass model='provider:model' (e.g. 'openai:gpt-4.1' or "
                "'anthropic:claude-sonnet-4-5') or a chat model instance to "
                f"create_deep_agent, or set the {MODEL_ENV_VAR} environment variable "
                f"(e.g. export {MODEL_ENV_VAR}=openai:gpt-4.1)."
            )
    if not isinstance(model, str):
        raise TypeError(
            f"model must be a 'provider:model' string or a BaseChatModel, not {type(model)!r}"
        )
    try:
        # a registered provider profile contributes keyword arguments (and a pre-init hook)
        from fathom.profiles.registry import provider_init_kwargs

        return init_chat_model(model, **provider_init_kwargs(model))
    except ValueError as error:
        raise ValueError(
            f"Cannot build a chat model from {model!r}: {error} "
            "Use the form 'provider:model', e.g. 'openai:gpt-4.1'."
        ) from error
