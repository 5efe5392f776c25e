"""JSON encoding of graph values for the wire.

Graph state holds LangChain messages (pydantic models), ``Interrupt`` dataclasses, tuples, sets,
datetimes and UUIDs. They are encoded the way LangGraph's own server encodes them: pydantic
models through ``model_dump()``, dataclasses as dicts, everything else as its nearest JSON type.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
from datetime import date, datetime, time, timedelta
from typing import Any
from uuid import UUID

import orjson
from pydantic import BaseModel

__all__ = ["dumps", "loads", "to_jsonable"]


def _default(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, (datetime, date, time)):
        return obj.isoformat()
    if isinstance(obj, timedelta):
        return obj.total_seconds()
    if isinstance(obj, UUID):
        return str(obj)
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (bytes, bytearray)):
        return base64.b64encode(obj).decode()
    to_json = getattr(obj, "to_json", None)
    if callable(to_json):
        return to_json()
    as_dict = getattr(obj, "_asdict", None)
    if callable(as_dict):
        return as_dict()
    return repr(obj)


def dumps(obj: Any) -> bytes:
    """Encode ``obj`` as JSON bytes, converting LangChain/LangGraph objects on the way."""
    return orjson.dumps(
        obj, default=_default, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS
    )


def loads(data: bytes | str) -> Any:
    """Decode JSON bytes or text."""
    return orjson.loads(data)


def to_jsonable(obj: Any) -> Any:
    """Return ``obj`` as plain JSON-compatible Python data (dicts, lists, strings, numbers)."""
    return orjson.loads(dumps(obj))
