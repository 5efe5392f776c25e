"""One agent, two turns of one checkpointed thread, its memory and a skill changed between them.

Run with either harness, the code the same but for the import:
`python tests/freshness_agent.py fathom|deepagents ROOT`. It prints one JSON line: the system
prompt of each turn's model request. `tests/test_memory_freshness.py` runs it in fathom's
environment and in the reference's (`benchmarks/.venv-deepagents`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver

from fathom.testing import ScriptedModel

harness, root = sys.argv[1], Path(sys.argv[2])
if harness == "fathom":
    from fathom import create_deep_agent
    from fathom.backends import FilesystemBackend
else:
    from deepagents import create_deep_agent
    from deepagents.backends import FilesystemBackend

SKILL = "---\nname: release\ndescription: {description}\n---\n\nHow to release.\n"


def write(memory: str, description: str) -> None:
    """The memory file and the skill, as they are before a turn."""
    (root / "skills" / "release").mkdir(parents=True, exist_ok=True)
    (root / "AGENTS.md").write_text(memory)
    (root / "skills" / "release" / "SKILL.md").write_text(SKILL.format(description=description))


model = ScriptedModel(replies=["first answer", "second answer"])
agent = create_deep_agent(
    model=model,
    backend=FilesystemBackend(root_dir=root, virtual_mode=True),
    memory=["/AGENTS.md"],
    skills=["/skills/"],
    checkpointer=InMemorySaver(),
)
config = {"configurable": {"thread_id": "one-thread"}}
write("The user prefers tea.", "Ship the weekly release.")
agent.invoke({"messages": [{"role": "user", "content": "hello"}]}, config)
write("The user prefers coffee now.", "Ship the release on Mondays only.")
agent.invoke({"messages": [{"role": "user", "content": "hello again"}]}, config)
print(json.dumps({"prompts": [request.system_prompt or "" for request in model.requests]}))
