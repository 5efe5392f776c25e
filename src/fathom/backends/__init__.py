"""Backends: where the agent's files live.

Layer: foundation; it must not import capabilities, agent, project, server, protocols or cli.
"""

from typing import TYPE_CHECKING

from fathom._lazy import lazy_exports

if TYPE_CHECKING:
    from fathom.backends.base import BackendBase
    from fathom.backends.composite import CompositeBackend
    from fathom.backends.filesystem import FilesystemBackend
    from fathom.backends.local_shell import DEFAULT_EXECUTE_TIMEOUT
    from fathom.backends.policy import BackendPolicy, FileOperation, PolicyBackend
    from fathom.backends.protocol import (
        BackendFactory,
        BackendProtocol,
        DeleteResult,
        EditResult,
        ExecuteResponse,
        FileDownloadResponse,
        FileInfo,
        FileUploadResponse,
        GlobResult,
        GrepMatch,
        GrepResult,
        LsResult,
        ReadResult,
        SandboxBackendProtocol,
        WriteResult,
        supports_delete,
        supports_execute,
    )
    from fathom.backends.sandbox import BaseSandbox
    from fathom.backends.shell.bubblewrap import BubblewrapSandbox
    from fathom.backends.shell.local import LocalShellBackend
    from fathom.backends.shell.scope import SandboxScope
    from fathom.backends.state import StateBackend, UploadResults
    from fathom.backends.store import NamespaceFactory, StoreBackend
    from fathom.backends.utils import create_file_data

_WHERE = {
    "BackendBase": "fathom.backends.base",
    "CompositeBackend": "fathom.backends.composite",
    "FilesystemBackend": "fathom.backends.filesystem",
    "DEFAULT_EXECUTE_TIMEOUT": "fathom.backends.local_shell",
    "BackendPolicy": "fathom.backends.policy",
    "FileOperation": "fathom.backends.policy",
    "PolicyBackend": "fathom.backends.policy",
    "BackendFactory": "fathom.backends.protocol",
    "BackendProtocol": "fathom.backends.protocol",
    "DeleteResult": "fathom.backends.protocol",
    "EditResult": "fathom.backends.protocol",
    "ExecuteResponse": "fathom.backends.protocol",
    "FileDownloadResponse": "fathom.backends.protocol",
    "FileInfo": "fathom.backends.protocol",
    "FileUploadResponse": "fathom.backends.protocol",
    "GlobResult": "fathom.backends.protocol",
    "GrepMatch": "fathom.backends.protocol",
    "GrepResult": "fathom.backends.protocol",
    "LsResult": "fathom.backends.protocol",
    "ReadResult": "fathom.backends.protocol",
    "SandboxBackendProtocol": "fathom.backends.protocol",
    "WriteResult": "fathom.backends.protocol",
    "supports_delete": "fathom.backends.protocol",
    "supports_execute": "fathom.backends.protocol",
    "BaseSandbox": "fathom.backends.sandbox",
    "BubblewrapSandbox": "fathom.backends.shell.bubblewrap",
    "LocalShellBackend": "fathom.backends.shell.local",
    "SandboxScope": "fathom.backends.shell.scope",
    "StateBackend": "fathom.backends.state",
    "UploadResults": "fathom.backends.state",
    "NamespaceFactory": "fathom.backends.store",
    "StoreBackend": "fathom.backends.store",
    "create_file_data": "fathom.backends.utils",
}

__all__ = [
    "DEFAULT_EXECUTE_TIMEOUT",
    "BackendBase",
    "BackendFactory",
    "BackendPolicy",
    "BackendProtocol",
    "BaseSandbox",
    "BubblewrapSandbox",
    "CompositeBackend",
    "DeleteResult",
    "EditResult",
    "ExecuteResponse",
    "FileDownloadResponse",
    "FileInfo",
    "FileOperation",
    "FileUploadResponse",
    "FilesystemBackend",
    "GlobResult",
    "GrepMatch",
    "GrepResult",
    "LocalShellBackend",
    "LsResult",
    "NamespaceFactory",
    "PolicyBackend",
    "ReadResult",
    "SandboxBackendProtocol",
    "SandboxScope",
    "StateBackend",
    "StoreBackend",
    "UploadResults",
    "WriteResult",
    "create_file_data",
    "supports_delete",
    "supports_execute",
]

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
