"""Call records from a capture of a model API's HTTP bodies (no proxy is needed to record them,
but a capture shows exactly what went on the wire).

Two file shapes are read:

- **JSONL**, one round trip a line: `{"request": BODY, "response": BODY}` (also spelled
  `req`/`resp` or `request_body`/`response_body`), each body the JSON object or its text,
  as a mitmproxy addon that writes the bodies of the model API's requests and responses
  would produce. Lines of another shape are skipped.
- **HAR** (`{"log": {"entries": [...]}}`, what browsers and mitmproxy export): each entry's
  `request.postData.text` and `response.content.text`.

Both OpenAI wire protocols are understood: Responses (`input` items, `instructions`,
`output` items, `usage.input_tokens`) and Chat Completions (`messages`, `choices`,
`usage.prompt_tokens`), streamed (server-sent events) or not. Round trips that are neither
(a model list, an embedding) are skipped.

The wire does not name the caller. Calls are grouped by their system prompt (`instructions`,
or the first system or developer message): the first prompt seen is the main agent's
(`agent`), later ones are subagents (`subagent`, `subagent-2`, ...). `names` maps a piece of
a system prompt to the caller's name, e.g. `{"calendar assistant": "calendar"}`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fathom.measure.calls import PREVIEW_CHARS, CallRecord, PromptItem, tool_names

__all__ = ["read_capture", "records_from_bodies"]

_REQUEST_KEYS = ("request", "req", "request_body")
_RESPONSE_KEYS = ("response", "resp", "response_body")


def _body(value: Any) -> Any:
    if isinstance(value, Mapping):
        inner = value.get("body")
        if isinstance(inner, (Mapping, str)) and not ({"model", "input", "messages", "output",
                                                        "choices"} & set(value)):
            return _body(inner)
        return value
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            try:
                return json.loads(text)
            except ValueError:
                return None
        if text.startswith(("data:", "event:")):
            return _from_events(text)
    return None


def _from_events(text: str) -> Any:
    """A streamed (server-sent events) response as the body it adds up to."""
    events = []
    for line in text.splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data and data != "[DONE]":
                try:
                    events.append(json.loads(data))
                except ValueError:
                    continue
    for event in events:  # Responses: the final event carries the whole response
        if isinstance(event, Mapping) and event.get("type") == "response.completed":
            return event.get("response")
    if not any(isinstance(e, Mapping) and "choices" in e for e in events):
        return None
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage: Any = None
    model = None
    for event in events:
        if not isinstance(event, Mapping):
            continue
        model = event.get("model") or model
        usage = event.get("usage") or usage
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                content.append(str(delta["content"]))
            for call in delta.get("tool_calls") or []:
                entry = calls.setdefault(int(call.get("index", 0)), {"function": {"name": ""}})
                name = (call.get("function") or {}).get("name")
                if name:
                    entry["function"]["name"] += name
    message = {"role": "assistant", "content": "".join(content),
               "tool_calls": [calls[k] for k in sorted(calls)]}
    return {"model": model, "choices": [{"message": message}], "usage": usage}


def _json_object(line: str) -> Mapping[str, Any] | None:
    """`line` as a JSON object, or None when it is none (a blank line, other output)."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, Mapping) else None


def _pairs_from_lines(lines: Iterable[str]) -> list[tuple[Any, Any]]:
    pairs = []
    for entry in filter(None, map(_json_object, lines)):
        request = next((entry[k] for k in _REQUEST_KEYS if k in entry), None)
        response = next((entry[k] for k in _RESPONSE_KEYS if k in entry), None)
        if request is not None and response is not None:
            pairs.append((request, response))
    return pairs


def _pairs_from_har(har: Mapping[str, Any]) -> list[tuple[Any, Any]]:
    pairs = []
    for entry in (har.get("log") or {}).get("entries") or []:
        request = ((entry.get("request") or {}).get("postData") or {}).get("text")
        response = ((entry.get("response") or {}).get("content") or {}).get("text")
        if request is not None and response is not None:
            pairs.append((request, response))
    return pairs


def read_capture(path: str | Path, names: Mapping[str, str] | None = None) -> list[CallRecord]:
    """The model calls in the capture file at `path` (JSONL or HAR), in file order."""
    text = Path(path).read_text(encoding="utf-8")
    stripped = text.lstrip()
    pairs: list[tuple[Any, Any]] = []
    if stripped.startswith("{") and '"log"' in stripped[:200]:
        try:
            loaded = json.loads(text)
        except ValueError:
            loaded = None
        if isinstance(loaded, Mapping) and "log" in loaded:
            pairs = _pairs_from_har(loaded)
    if not pairs:
        pairs = _pairs_from_lines(text.splitlines())
    return records_from_bodies(pairs, names)


# --------------------------------------------------------------------------- bodies


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                parts.append(str(part.get("text") or part.get("output_text") or ""))
            elif isinstance(part, str):
                parts.append(part)
        return " ".join(p for p in parts if p)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _item(raw: Any) -> PromptItem:
    if not isinstance(raw, Mapping):
        text = str(raw)
        return PromptItem("text", _cut(text), len(text))
    kind = str(raw.get("role") or raw.get("type") or "item")
    if raw.get("type") == "function_call":
        text = f"→ {raw.get('name')}({raw.get('arguments', '')})"
    elif raw.get("type") == "function_call_output":
        text = _content_text(raw.get("output"))
    elif raw.get("type") == "reasoning":
        text = _content_text(raw.get("summary")) or "(reasoning)"
    else:
        text = _content_text(raw.get("content"))
        calls = raw.get("tool_calls") or []
        text = " ".join([text, *(f"→ {(c.get('function') or {}).get('name')}"
                                 f"({(c.get('function') or {}).get('arguments', '')})"
                                 for c in calls if isinstance(c, Mapping))]).strip()
    return PromptItem(kind, _cut(text), len(text))


def _system(request: Mapping[str, Any], items: list[Any]) -> str:
    if request.get("instructions"):
        return str(request["instructions"])
    for item in items:
        if isinstance(item, Mapping) and item.get("role") in ("system", "developer"):
            return _content_text(item.get("content"))
    return ""


def _usage(response: Mapping[str, Any]) -> tuple[int, int, int | None, int | None]:
    usage = response.get("usage") or {}
    if "input_tokens" in usage or "output_tokens" in usage:  # Responses
        reasoning = (usage.get("output_tokens_details") or {}).get("reasoning_tokens")
        cached = (usage.get("input_tokens_details") or {}).get("cached_tokens")
        return (int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0),
                reasoning, cached)
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    return (int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
            reasoning, cached)


def _answer(response: Mapping[str, Any]) -> tuple[list[str], str]:
    calls: list[str] = []
    texts: list[str] = []
    if "output" in response:  # Responses
        for item in response.get("output") or []:
            if not isinstance(item, Mapping):
                continue
            if item.get("type") == "function_call":
                calls.append(str(item.get("name")))
            elif item.get("type") == "message":
                texts.append(_content_text(item.get("content")))
    for choice in response.get("choices") or []:  # Chat Completions
        message = choice.get("message") or {}
        calls.extend(str((c.get("function") or {}).get("name"))
                     for c in message.get("tool_calls") or [])
        texts.append(_content_text(message.get("content")))
    return calls, _cut(" ".join(t for t in texts if t))


def records_from_bodies(
    pairs: Iterable[tuple[Any, Any]], names: Mapping[str, str] | None = None
) -> list[CallRecord]:
    """Call records from (request body, response body) pairs of model API round trips (each
    body a JSON object, its text, or a streamed response's server-sent events)."""
    callers: dict[str, str] = {}
    previous: dict[str, list[str]] = {}
    previous_tools: dict[str, list[str]] = {}
    records: list[CallRecord] = []
    for raw_request, raw_response in pairs:
        request, response = _body(raw_request), _body(raw_response)
        if not isinstance(request, Mapping) or not isinstance(response, Mapping):
            continue
        if "input" in request:
            raw = request["input"]
            items = [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw)
        elif "messages" in request:
            items = list(request["messages"])
        else:
            continue
        system = _system(request, items)
        if system not in callers:
            named = next((name for piece, name in (names or {}).items() if piece in system),
                         None)
            count = len(callers)
            callers[system] = named or ("agent" if count == 0 else
                                        "subagent" if count == 1 else f"subagent-{count}")
        caller = callers[system]
        kind = "agent" if caller == next(iter(callers.values())) else "subagent"
        rendered = [json.dumps(i, sort_keys=True, ensure_ascii=False) for i in items]
        before = previous.get(caller, [])
        kept = 0
        while kept < min(len(before), len(rendered)) and before[kept] == rendered[kept]:
            kept += 1
        new = [_item(i) for i in items[kept:]]
        if request.get("instructions") and caller not in previous:
            new.insert(0, PromptItem("instructions", _cut(system), len(system)))
        tools = tool_names(request.get("tools") or [])
        tokens_in, tokens_out, reasoning, cached = _usage(response)
        calls, text = _answer(response)
        records.append(CallRecord(
            caller=caller, kind=kind,
            messages=len(items) + (1 if request.get("instructions") else 0),
            tools=tools, input_tokens=tokens_in, output_tokens=tokens_out,
            reasoning_tokens=reasoning, cached_tokens=cached, new=new, new_count=len(new),
            tools_changed=caller in previous_tools and previous_tools[caller] != tools,
            output_calls=calls, output_text=text,
            model=str(response.get("model") or request.get("model") or "") or None,
        ))
        previous[caller] = rendered
        previous_tools[caller] = tools
    return records
