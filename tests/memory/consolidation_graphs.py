"""Scripted graphs for the consolidation tests, importable in process and servable as a file.

The end-to-end test copies this file into a deployment folder and names its graphs in
`langgraph.json`, so it imports nothing but fathom and LangChain.

- `merge_policy`: a scripted merging model. Every user line of the conversations it is given
  that says `remember: FACT` becomes `- FACT`, appended to the memory file as the prompt
  showed it (`write_file`), duplicates included: a conversation merged twice shows as a fact
  written twice.
- `consolidation_agent`: `create_consolidation_agent` on that model (threads from the server).
- `assistant`: a conversation agent whose memory is the user's `/memories/facts.md` (the
  same namespace) and whose scripted model answers with the memory it was shown.
"""

import re

from fathom import create_deep_agent
from fathom.memory.consolidation import (
    DEFAULT_MEMORY_PATH,
    create_consolidation_agent,
    user_memory_backend,
)
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

REMEMBER = re.compile(r"^user: .*?remember: (.+)$", re.MULTILINE)
MEMORY = re.compile(
    r'<memory_file path="' + re.escape(DEFAULT_MEMORY_PATH) + r'">\n(.*?)\n</memory_file>',
    re.DOTALL,
)


def shown_memory(request: ScriptRequest) -> str:
    """The memory file's text as the prompt shows it ("" when not created yet)."""
    found = MEMORY.search(request.system_prompt or "")
    text = found.group(1) if found else ""
    return text + "\n" if text.startswith("# Facts") else ""


def merge_policy(request: ScriptRequest):
    """Append each `remember:` fact of the conversations to the memory file, then report."""
    if request.turn_results:
        return ai(f"merged: {request.turn_results[-1].text}")
    facts = REMEMBER.findall(request.last_human_text)
    if not facts:
        return ai("Nothing worth remembering.")
    current = shown_memory(request) or "# Facts\n"
    content = current + "".join(f"- {fact.strip()}\n" for fact in facts)
    return ai("", tool_call("write_file", {"file_path": DEFAULT_MEMORY_PATH, "content": content}))


def answer_with_memory(request: ScriptRequest):
    """The conversation agent's model: answers with the memory file its prompt showed."""
    return ai(f"memory: {shown_memory(request) or '(none)'}")


consolidation_agent = create_consolidation_agent(ScriptedModel(policy=merge_policy))

assistant = create_deep_agent(
    model=ScriptedModel(policy=answer_with_memory),
    backend=user_memory_backend(),
    memory=[DEFAULT_MEMORY_PATH],
    name="assistant",
)
