"""fathom's self-hostable Agent Protocol server (the LangGraph Platform API superset).

Layer: server; it must not import protocols or cli.
"""

from fathom.hosting.client import in_process_client
from fathom.server.app import create_app
from fathom.server.deployment import Deployment, DeploymentError, load_deployment
from fathom.server.graphs import GraphSource
from fathom.server.security import security_middleware
from fathom.server.storage import Storage, StorageError, open_storage

__all__ = [
    "Deployment",
    "DeploymentError",
    "GraphSource",
    "Storage",
    "StorageError",
    "create_app",
    "in_process_client",
    "load_deployment",
    "open_storage",
    "security_middleware",
]
