"""Backends: where the agent's files live."""

from fathom.backends.base import BackendBase
from fathom.backends.composite import CompositeBackend
from fathom.backends.filesystem import FilesystemBackend
from fathom.backends.policy import BackendPolicy, FileOperation, PolicyBackend
from fathom.backends.protocol import (
    BackendFactory,
    BackendProtocol,
    DeleteResult,
    EditResult,
    FileInfo,
    GlobResult,
    GrepMatch,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
    supports_delete,
)
from fathom.backends.state import StateBackend
from fathom.backends.store import StoreBackend
from fathom.backends.utils import create_file_data

__all__ = [
    "BackendBase",
    "BackendFactory",
    "BackendPolicy",
    "BackendProtocol",
    "CompositeBackend",
    "DeleteResult",
    "EditResult",
    "FileInfo",
    "FileOperation",
    "FilesystemBackend",
    "GlobResult",
    "GrepMatch",
    "GrepResult",
    "LsResult",
    "PolicyBackend",
    "ReadResult",
    "StateBackend",
    "StoreBackend",
    "WriteResult",
    "create_file_data",
    "supports_delete",
]
