"""`UnsupportedContentMiddleware`: content blocks the model cannot take become a text notice.

An image sent to a text-only model makes the provider refuse the request, and because the
image stays in the thread, it would refuse every later request too. This middleware looks
at each model request's user and tool messages and replaces each block the request's model
cannot take with a short text block that says what was left out
(`[read_file: /path was not attached because this model does not support image content
(image/png).]`). Only the request changes: the thread keeps the original content, so a
later model that takes it sees it again.

What a model takes is read from its profile (`model.profile`, LangChain's model profiles):
`image_inputs`, `audio_inputs`, `video_inputs` and `pdf_inputs` for user messages, plus
`image_tool_message` and `pdf_tool_message` for tool results. A field the profile lacks
counts as supported; only an explicit `False` removes a block. A document other than a PDF
sent inline (a base64 `.docx`, ...) goes only to an OpenAI model on the Responses API,
which takes those formats; a document by URL or file id is the provider's to resolve and
always passes.

Put it last in the middleware list (innermost), so it judges the model the request really
goes to after any middleware that switches models. `create_deep_agent` adds it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ModelRequest,
    TracePolicy,
    omit_payload,
)
from langchain_core.messages import AnyMessage, HumanMessage, ToolMessage

from fathom.call_hooks import ModelRequestRewrite

__all__ = ["OPENAI_FILE_MIME_TYPES", "UnsupportedContentMiddleware"]

_INPUT_FIELDS: Final[Mapping[str, str]] = {
    "image": "image_inputs",
    "audio": "audio_inputs",
    "video": "video_inputs",
    "file": "pdf_inputs",
}
"""The profile field that says whether the model takes a block type in a user message."""

_TOOL_MESSAGE_FIELDS: Final[Mapping[str, str]] = {
    "image": "image_tool_message",
    "file": "pdf_tool_message",
}
"""The profile field that also has to allow a block type inside a tool result."""

_PDF: Final = "application/pdf"

OPENAI_FILE_MIME_TYPES: Final = frozenset(
    {
        # office documents
        "application/msword",
        "application/vnd.ms-excel",
        "application/vnd.ms-powerpoint",
        "application/vnd.oasis.opendocument.text",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.apple.pages",
        "application/vnd.apple.keynote",
        "application/vnd.apple.iwork",
        "application/vnd.google-apps.document",
        "application/vnd.google-apps.presentation",
        "application/vnd.google-apps.spreadsheet",
        "application/rtf",
        "message/rfc822",
        # text and code formats (so text that is not UTF-8 can still go as a file)
        "application/csv",
        "application/graphql",
        "application/javascript",
        "application/json",
        "application/json5",
        "application/toml",
        "application/typescript",
        "application/yaml",
        "application/x-awk",
        "application/x-bash",
        "application/x-graphql",
        "application/x-httpd-php",
        "application/x-httpd-php-source",
        "application/x-iif",
        "application/x-json5",
        "application/x-ndjson",
        "application/x-patch",
        "application/x-php",
        "application/x-powershell",
        "application/x-protobuf",
        "application/x-rust",
        "application/x-scala",
        "application/x-sql",
        "application/x-subrip",
        "application/x-terraform",
        "application/x-toml",
        "application/x-yaml",
        "text/calendar",
        "text/css",
        "text/csv",
        "text/html",
        "text/javascript",
        "text/jsx",
        "text/markdown",
        "text/plain",
        "text/rtf",
        "text/tab-separated-values",
        "text/tsx",
        "text/typescript",
        "text/vcard",
        "text/x-asm",
        "text/x-c",
        "text/x-c++",
        "text/x-csharp",
        "text/x-diff",
        "text/x-go",
        "text/x-java",
        "text/x-kotlin",
        "text/x-lua",
        "text/x-makefile",
        "text/x-markdown",
        "text/x-objective-c",
        "text/x-perl",
        "text/x-php",
        "text/x-python",
        "text/x-r",
        "text/x-ruby",
        "text/x-rust",
        "text/x-scala",
        "text/x-sh",
        "text/x-sql",
        "text/x-swift",
        "text/x-tex",
        "text/x-typescript",
        "text/xml",
        "application/xml",
    }
)
"""MIME types of documents an OpenAI model on the Responses API takes inline as files."""


def _profile_accepts(block: Mapping[str, Any], profile: Mapping[str, Any],
                     in_tool_message: bool) -> bool:  # fmt: skip
    kind = block.get("type")
    field = _INPUT_FIELDS.get(str(kind))
    if field is None:
        return True
    if kind == "file" and ("base64" not in block or block.get("mime_type") != _PDF):
        return True  # by URL or file id: the provider's to resolve; no field for non-PDFs
    if in_tool_message:
        tool_field = _TOOL_MESSAGE_FIELDS.get(str(kind))
        if tool_field is not None and profile.get(tool_field) is False:
            return False
    return profile.get(field) is not False


def _inline_document(block: Mapping[str, Any]) -> bool:
    """A base64 `file` block that is not a PDF (no profile field speaks of those)."""
    return block.get("type") == "file" and "base64" in block and block.get("mime_type") != _PDF


def _openai_responses_model(model: Any) -> bool:
    """Whether `model` is LangChain's `ChatOpenAI` / `AzureChatOpenAI` on the Responses API.
    Only loaded classes are looked at: a model of them means they are loaded, and importing
    `langchain_openai` here would load the OpenAI SDK for everyone."""
    classes = tuple(
        cls
        for module, name in (
            ("langchain_openai.chat_models.base", "ChatOpenAI"),
            ("langchain_openai.chat_models.azure", "AzureChatOpenAI"),
        )
        if isinstance(cls := getattr(sys.modules.get(module), name, None), type)
    )
    return bool(classes) and isinstance(model, classes) and bool(
        getattr(model, "use_responses_api", False)
    )


class UnsupportedContentMiddleware(ModelRequestRewrite, AgentMiddleware):
    """Replaces the content blocks a request's model cannot take with a text notice.

    Takes no arguments. Every model request's user and tool messages are checked against
    the model's profile (`model.profile`); a message with a block the model cannot take is
    sent as a copy whose block is a text notice naming what was left out (the `read_file`
    path when the message came from `read_file`). The state keeps the original messages.

    Put it last in `middleware=[...]`; `create_deep_agent` adds it to every agent.

    Example:
        ```python
        from langchain.agents import create_agent
        from fathom.middleware import FilesystemMiddleware, UnsupportedContentMiddleware

        agent = create_agent(
            model, middleware=[FilesystemMiddleware(), UnsupportedContentMiddleware()]
        )
        ```
    """

    trace_policy = TracePolicy(process_inputs=omit_payload)
    """Hook inputs (the request's messages) stay out of traces unless a policy says so."""

    def _is_supported(self, block: Mapping[str, Any], *, model: Any,
                      in_tool_message: bool) -> bool:  # fmt: skip
        """Whether `model` takes `block` (a model without a profile has an empty one)."""
        if _inline_document(block):
            return (
                block.get("mime_type") in OPENAI_FILE_MIME_TYPES
                and _openai_responses_model(model)
            )
        profile = getattr(model, "profile", None) or {}
        return _profile_accepts(block, profile, in_tool_message)

    def _replace(self, block: Mapping[str, Any], message: AnyMessage) -> dict[str, Any]:
        """The text block sent in place of `block`."""
        path = message.additional_kwargs.get("read_file_path", "the requested file")
        mime_type = block.get("mime_type", "unknown")
        return {
            "type": "text",
            "text": (
                f"[read_file: {path} was not attached because this model does not support "
                f"{block.get('type')} content ({mime_type}).]"
            ),
        }

    def _filter_message(self, message: AnyMessage, *, model: Any) -> AnyMessage:
        """`message`, or a copy of it with the blocks `model` cannot take replaced."""
        in_tool = isinstance(message, ToolMessage)
        blocks = cast("list[Any]", message.content_blocks)
        kept = [
            block
            if self._is_supported(block, model=model, in_tool_message=in_tool)
            else self._replace(block, message)
            for block in blocks
        ]
        if kept == blocks:
            return message
        return message.model_copy(update={"content": kept})

    def _filter_request(self, request: ModelRequest) -> ModelRequest:
        """`request`, or a copy whose messages its model can all take."""
        messages: list[AnyMessage] = []
        changed = False
        for message in request.messages:
            if isinstance(message, HumanMessage | ToolMessage):
                filtered = self._filter_message(message, model=request.model)
                changed = changed or filtered is not message
                messages.append(filtered)
            else:
                messages.append(message)
        return request.override(messages=messages) if changed else request

    def rewrite_model_request(self, request: ModelRequest) -> ModelRequest:
        """The request with the blocks its model cannot take replaced (sync and async)."""
        return self._filter_request(request)
