"""`task(..., response_schema=...)`: ask a subagent for JSON and check it against the schema.

A subagent's structured output is fixed when it is built, so a schema chosen by the code
at run time is put in the task as an instruction, and the answer is parsed and checked
here. The check covers the JSON Schema keywords a model-written schema uses: `type`
(one or a list), `properties`, `required`, `additionalProperties: false`, `items`,
`enum` and `const`; other keywords are accepted unchecked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from fathom.errors import FathomError

__all__ = ["ResponseSchemaError", "parse_answer", "schema_errors", "schema_instruction"]


class ResponseSchemaError(FathomError, ValueError):
    """A subagent's answer is not JSON, or does not match the `response_schema`."""


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,),
    "integer": (int,), "number": (int, float), "null": (type(None),),
}  # fmt: skip


def schema_instruction(schema: Mapping[str, Any]) -> str:
    """The text added to the task: answer with JSON matching `schema`, and nothing else."""
    return (
        "\n\nYour final answer must be only a JSON value (no prose, no code fence) that "
        f"matches this JSON Schema:\n{json.dumps(schema, ensure_ascii=False)}"
    )


def _is_type(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _TYPES.get(name, (object,)))


def schema_errors(value: Any, schema: Mapping[str, Any], path: str = "$") -> list[str]:
    """What in `value` breaks `schema` (empty: it matches), each naming its JSON path."""
    errors: list[str] = []
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is_type(value, n) for n in names):
            return [f"{path}: expected {' or '.join(names)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {schema['enum']!r}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: expected {schema['const']!r}")
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        errors += [f"{path}: missing {key!r}" for key in schema.get("required") or []
                   if key not in value]
        for key, item in value.items():
            if key in properties:
                errors += schema_errors(item, properties[key], f"{path}.{key}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected key {key!r}")
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            errors += schema_errors(item, schema["items"], f"{path}[{i}]")
    return errors


_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*?)\n?```$", re.DOTALL)


def parse_answer(answer: str, schema: Mapping[str, Any]) -> Any:
    """The subagent's answer as the JSON value `schema` asks for.

    Raises:
        ResponseSchemaError: the answer is not JSON or does not match.
    """
    text = answer.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ResponseSchemaError(
            f"the subagent's answer is not JSON ({error.msg}): {answer[:200]!r}"
        ) from None
    errors = schema_errors(value, schema)
    if errors:
        raise ResponseSchemaError(
            "the subagent's answer does not match response_schema: " + "; ".join(errors[:5])
        )
    return value
