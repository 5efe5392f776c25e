"""`ScriptedOpenAIServer`: a `ScriptedModel` behind a real OpenAI-compatible HTTP endpoint.

It lets tests exercise a real provider client (`ChatOpenAI`, the `openai` SDK, `httpx`)
end to end, offline, on 127.0.0.1. Only the standard library is used.

Supported routes: `POST /v1/chat/completions` (JSON or Server-Sent Events when
`"stream": true`) and `GET /v1/models`. Errors use OpenAI's
`{"error": {"message", "type", "code"}}` shape; no request can stop the server.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    InvalidToolCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
)

from fathom.errors import FathomError
from fathom.testing.scripted import ScriptedModel, ScriptExhausted

__all__ = ["ScriptedOpenAIServer"]

logger = logging.getLogger(__name__)

_CHAT_PATH = "/v1/chat/completions"
_MODELS_PATH = "/v1/models"
_POLL_SECONDS = 0.02


class _BadRequest(FathomError, ValueError):
    """A client error that becomes an HTTP 400 response."""

    def __init__(self, message: str, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------- OpenAI -> LangChain


def _content(raw: Any, where: str) -> str | list[Any]:
    if raw is None:
        return ""
    if isinstance(raw, str | list):
        return raw
    msg = f"{where}.content must be a string, a list of content parts or null"
    raise _BadRequest(msg, "invalid_messages")


def _tool_calls(raw: Any, where: str) -> tuple[list[ToolCall], list[InvalidToolCall]]:
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        raise _BadRequest(f"{where}.tool_calls must be a list", "invalid_messages")
    valid: list[ToolCall] = []
    invalid: list[InvalidToolCall] = []
    for k, call in enumerate(raw):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            msg = f"{where}.tool_calls[{k}] must be an object with a 'function' object"
            raise _BadRequest(msg, "invalid_messages")
        name = str(function.get("name") or "")
        arguments = function.get("arguments") or "{}"
        call_id = call.get("id")
        error: str | None = None
        args: Any = None
        try:
            args = json.loads(arguments)
        except (TypeError, json.JSONDecodeError) as exc:
            error = f"arguments are not valid JSON: {exc}"
        else:
            if not isinstance(args, dict):
                error = "arguments are not a JSON object"
        if error is None:
            valid.append(ToolCall(name=name, args=args, id=call_id, type="tool_call"))
        else:
            invalid.append(
                InvalidToolCall(
                    name=name,
                    args=str(arguments),
                    id=call_id,
                    error=error,
                    type="invalid_tool_call",
                )
            )
    return valid, invalid


def _to_message(raw: Any, position: int) -> BaseMessage:
    where = f"messages[{position}]"
    if not isinstance(raw, dict):
        raise _BadRequest(f"{where} must be an object", "invalid_messages")
    role = raw.get("role")
    content = _content(raw.get("content"), where)
    name = raw.get("name")
    if role in ("system", "developer"):
        return SystemMessage(content=content, name=name)
    if role == "user":
        return HumanMessage(content=content, name=name)
    if role == "assistant":
        valid, invalid = _tool_calls(raw.get("tool_calls"), where)
        return AIMessage(content=content, name=name, tool_calls=valid, invalid_tool_calls=invalid)
    if role == "tool":
        return ToolMessage(content=content, tool_call_id=str(raw.get("tool_call_id") or ""))
    raise _BadRequest(f"{where}.role {role!r} is not supported", "invalid_messages")


def _parse_request(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _BadRequest(f"Request body is not valid JSON: {exc}", "invalid_json") from exc
    if not isinstance(payload, dict):
        raise _BadRequest("Request body must be a JSON object", "invalid_json")
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        msg = "'messages' is required and must be a non-empty list"
        raise _BadRequest(msg, "missing_messages")
    tools = payload.get("tools")
    if tools is not None and not (
        isinstance(tools, list) and all(isinstance(t, dict) for t in tools)
    ):
        raise _BadRequest("'tools' must be a list of objects", "invalid_tools")
    return payload


# --------------------------------------------------------------------------- LangChain -> OpenAI


def _openai_tool_calls(message: AIMessage) -> list[dict[str, Any]]:
    return [
        {
            "id": tc["id"],
            "type": "function",
            "function": {"name": tc["name"], "arguments": json.dumps(tc["args"])},
        }
        for tc in message.tool_calls
    ]


def _usage(message: AIMessage) -> dict[str, int]:
    usage = message.usage_metadata
    prompt = usage["input_tokens"] if usage else 0
    completion = usage["output_tokens"] if usage else 0
    total = usage["total_tokens"] if usage else prompt + completion
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}


def _finish_reason(message: AIMessage) -> str:
    default = "tool_calls" if message.tool_calls else "stop"
    return str(message.response_metadata.get("finish_reason") or default)


def _envelope(kind: str, model: str, completion_id: str) -> dict[str, Any]:
    return {"id": completion_id, "object": kind, "created": int(time.time()), "model": model}


def _completion(message: AIMessage, model: str, completion_id: str) -> dict[str, Any]:
    text = str(message.text)
    body: dict[str, Any] = {"role": "assistant", "content": text}
    if message.tool_calls:
        body["content"] = text or None
        body["tool_calls"] = _openai_tool_calls(message)
    choice = {"index": 0, "message": body, "finish_reason": _finish_reason(message)}
    return {
        **_envelope("chat.completion", model, completion_id),
        "choices": [choice],
        "usage": _usage(message),
    }


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _stream_chunks(
    message: AIMessage, model: str, completion_id: str, *, size: int, include_usage: bool
) -> Iterator[dict[str, Any]]:
    envelope = _envelope("chat.completion.chunk", model, completion_id)

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return {**envelope, "choices": [choice]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(str(message.text), size):
        yield chunk({"content": piece})
    for k, call in enumerate(_openai_tool_calls(message)):
        head = {**call, "index": k, "function": {"name": call["function"]["name"], "arguments": ""}}
        yield chunk({"tool_calls": [head]})
        for piece in _pieces(call["function"]["arguments"], size):
            yield chunk({"tool_calls": [{"index": k, "function": {"arguments": piece}}]})
    yield chunk({}, _finish_reason(message))
    if include_usage:
        yield {**envelope, "choices": [], "usage": _usage(message)}


# --------------------------------------------------------------------------- HTTP plumbing


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    scripted_model: ScriptedModel

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about clients that hang up; report anything else."""
        if not isinstance(sys.exception(), ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    _client_gone = False

    @property
    def _model(self) -> ScriptedModel:
        """The scripted model of the server this request came to (always a `_Server`)."""
        server = self.server
        assert isinstance(server, _Server)
        return server.scripted_model

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    # -- routes

    def do_GET(self) -> None:
        if self._route() == _MODELS_PATH:
            model = self._model.model_name
            entry = {"id": model, "object": "model", "created": 0, "owned_by": "fathom"}
            self._send_json(200, {"object": "list", "data": [entry]})
        else:
            self._send_error(404, f"No route for GET {self.path}", "not_found", "not_found")

    def do_POST(self) -> None:
        try:
            body = self._read_body()
            if self._route() != _CHAT_PATH:
                self._send_error(404, f"No route for POST {self.path}", "not_found", "not_found")
                return
            self._chat_completions(_parse_request(body))
        except _BadRequest as exc:
            self._send_error(400, str(exc), "invalid_request_error", exc.code)
        except ContextOverflowError as exc:
            # What OpenAI answers when the prompt does not fit the model's window.
            self._send_error(400, str(exc), "invalid_request_error", "context_length_exceeded")
        except ScriptExhausted as exc:
            # Retrying cannot help: tell the OpenAI SDK not to.
            self._send_error(500, str(exc), "server_error", "script_exhausted", retry=False)
        except Exception as exc:  # boundary: the request handler answers 500 with the error
            logger.debug("the scripted endpoint answers 500", exc_info=exc)
            self._send_error(500, f"{type(exc).__name__}: {exc}", "server_error", "script_error")

    def _chat_completions(self, payload: dict[str, Any]) -> None:
        model = self._model
        messages = [_to_message(raw, i) for i, raw in enumerate(payload["messages"])]
        model.wait_turn()
        reply = model.respond(messages, payload.get("tools") or [])
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        if not payload.get("stream"):
            self._send_json(200, _completion(reply, model.model_name, completion_id))
            return
        options = payload.get("stream_options") or {}
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        chunks = _stream_chunks(
            reply,
            model.model_name,
            completion_id,
            size=model.stream_chunk_chars,
            include_usage=include_usage,
        )
        self._send_events(chunks)

    # -- io

    def _route(self) -> str:
        return urlsplit(self.path).path.rstrip("/")

    def _read_body(self) -> bytes:
        try:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                return self._read_chunked()
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError as exc:
            self.close_connection = True  # framing is unknown: don't reuse the connection
            raise _BadRequest(f"Malformed request body framing: {exc}", "invalid_body") from exc
        return self.rfile.read(length) if length > 0 else b""

    def _read_chunked(self) -> bytes:
        parts = []
        while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
            parts.append(self.rfile.read(size))
            self.rfile.readline()
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass  # trailers
        return b"".join(parts)

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self._write(data)

    def _send_error(
        self, status: int, message: str, kind: str, code: str, *, retry: bool | None = None
    ) -> None:
        headers = {} if retry is None else {"x-should-retry": str(retry).lower()}
        error = {"message": message, "type": kind, "code": code, "param": None}
        self._send_json(status, {"error": error}, headers)

    def _send_events(self, chunks: Iterator[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        frames = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks]
        frames.append(b"data: [DONE]\n\n")
        for frame in frames:
            self._write(f"{len(frame):X}\r\n".encode() + frame + b"\r\n")
        self._write(b"0\r\n\r\n")

    def _write(self, data: bytes) -> None:
        if self._client_gone:
            return
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except ConnectionError:
            # The client went away: drop the rest of this response and the connection.
            self._client_gone = True
            self.close_connection = True


# --------------------------------------------------------------------------- public server


class ScriptedOpenAIServer:
    """Serve a `ScriptedModel` as an OpenAI-compatible chat completions endpoint.

    Example:
        ```python
        with ScriptedOpenAIServer(model) as srv:
            llm = ChatOpenAI(base_url=srv.base_url, api_key="scripted", model="scripted")
        ```

    Each request calls `model.wait_turn()` (its `latency` and `rendezvous`) in its own
    thread and then `model.respond`, so requests show up in `model.requests` like direct
    calls.
    """

    def __init__(self, model: ScriptedModel, host: str = "127.0.0.1", port: int = 0) -> None:
        """Create a stopped server.

        Args:
            model: The model that answers requests.
            host: Interface to bind.
            port: Port to bind; `0` picks a free one.
        """
        self.model = model
        self._address = (host, port)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Root URL, e.g. `http://127.0.0.1:54321` (the server must be started)."""
        if self._server is None:
            raise RuntimeError("ScriptedOpenAIServer is not running; call start() first")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """OpenAI `base_url`, e.g. `http://127.0.0.1:54321/v1`."""
        return f"{self.url}/v1"

    def start(self) -> Self:
        """Bind the socket and serve on a daemon thread. Idempotent."""
        if self._server is None:
            server = _Server(self._address, _Handler)
            server.scripted_model = self.model
            thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": _POLL_SECONDS},  # bounds how long stop() waits
                name="scripted-openai-server",
                daemon=True,
            )
            thread.start()
            self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        """Stop serving and close the socket. Idempotent."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
