"""`fathom.middleware.summarization`: the path the Deep Agents API uses for summarization.

The code lives in `fathom.middleware.context.summarization`; this module re-exports its
public names so that `from deepagents.middleware.summarization import ...` ports by
changing the package name. Owns nothing.
"""

from fathom.middleware.context.summarization import (
    ARCHIVE_DIR,
    COMPACT_FLAG,
    COMPACT_TOOL_DESCRIPTION,
    FALLBACK_KEEP_MESSAGES,
    FALLBACK_TRIGGER_TOKENS,
    OFFLOAD_DIR,
    SUMMARY_SOURCE,
    SummarizationMiddleware,
    SummarizationToolMiddleware,
    artifacts_dir,
    context_window,
    create_summarization_middleware,
    create_summarization_tool_middleware,
    is_context_overflow,
)

__all__ = [
    "ARCHIVE_DIR",
    "COMPACT_FLAG",
    "COMPACT_TOOL_DESCRIPTION",
    "FALLBACK_KEEP_MESSAGES",
    "FALLBACK_TRIGGER_TOKENS",
    "OFFLOAD_DIR",
    "SUMMARY_SOURCE",
    "SummarizationMiddleware",
    "SummarizationToolMiddleware",
    "artifacts_dir",
    "context_window",
    "create_summarization_middleware",
    "create_summarization_tool_middleware",
    "is_context_overflow",
]
