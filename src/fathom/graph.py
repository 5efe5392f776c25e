"""`fathom.graph`: where `create_deep_agent` and the agent state live, under the module
name the Deep Agents package uses (`deepagents.graph`), so imports from it port unchanged.

Layer: agent; it must not import project, server, protocols or cli.
"""

from fathom.agent import create_deep_agent
from fathom.state import DeepAgentState

__all__ = ["DeepAgentState", "create_deep_agent"]
