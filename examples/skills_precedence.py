"""Skill source precedence: a later source's skill replaces an earlier one of the same name.

Deep Agents tutorial, section 13.5 (来源优先级 / Source precedence): with
`skills=["/skills/user/", "/skills/project/"]`, if both sources contain a skill named
`web-search`, the one from `/skills/project/` wins because it is loaded last. Skills with
other names are kept from every source. Then section 13.4 (使用 / Usage): the SDK scans only
the sources it is given, so CLI-style layering is written out, lowest priority first:

    "<user-home>/.deepagents/{agent}/skills/",
    "<user-home>/.agents/skills/",
    "<project-root>/.deepagents/skills/",
    "<project-root>/.agents/skills/",

Ported to fathom: only the imports change (`deepagents` → `fathom`). The hosted model
becomes a `ScriptedModel` that picks the listed skill whose name fits the request, reads its
SKILL.md with `read_file` and gives the reply that SKILL.md prescribes, so the output shows
which copy of a skill the agent followed. The tutorial's `...` (other arguments) is empty
here. The skills themselves are not in the tutorial and are written for this example: for
13.5 they are put into the default `StateBackend` with `invoke({"files": ...})`; for the
layering, `<user-home>` and `<project-root>` are temporary directories read through
`FilesystemBackend(root_dir=<project-root>)`, and `<project-root>/.deepagents/skills/` is left
missing (a missing source is skipped).

Run: `.venv/bin/python examples/skills_precedence.py`
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from fathom import create_deep_agent
from fathom.backends.utils import create_file_data
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call


def skill(name: str, description: str, reply: str) -> str:
    """A SKILL.md whose instructions end in the reply to give."""
    return (
        f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\n"
        f"## Instructions\n\nWhen you have done the work, answer with:\n\nReply: {reply}\n"
    )


# section 13.5: two sources with a `web-search` skill each, and one more user skill
SECTION_13_5_FILES = {
    "/skills/user/web-search/SKILL.md": skill(
        "web-search",
        "Search the web for current information with any search engine.",
        "Searching the whole web with my usual engine.",
    ),
    "/skills/user/summarize/SKILL.md": skill(
        "summarize",
        "Summarize long documents into a few bullet points.",
        "Here is the summary.",
    ),
    "/skills/project/web-search/SKILL.md": skill(
        "web-search",
        "Search the web for current information, only in this project's approved sources.",
        "Searching only the approved sources: docs.langchain.com and "
        "github.com/langchain-ai/langgraph/releases.",
    ),
}

# section 13.4: CLI-style layers (paths relative to <user-home> / <project-root>)
LAYER_FILES = {
    ("home", ".deepagents/my-agent/skills/code-review/SKILL.md"): skill(
        "code-review",
        "Review a code change for bugs and style.",
        "Reviewed with my personal checklist.",
    ),
    ("home", ".agents/skills/commit-message/SKILL.md"): skill(
        "commit-message",
        "Write a commit message for staged changes.",
        "Here is a commit message.",
    ),
    ("project", ".agents/skills/code-review/SKILL.md"): skill(
        "code-review",
        "Review a code change for bugs and style, with this project's checklist.",
        "Reviewed with the project checklist: tests added, types checked, changelog updated.",
    ),
}

SKILL_LINE = re.compile(r"^- (\S+) \(`(.+?SKILL\.md)`\): (.*)$", re.MULTILINE)


def listed_skills(request: ScriptRequest) -> dict[str, str]:
    """Skill name → SKILL.md path, as the skills section of the system prompt lists them."""
    return {m[1]: m[2] for m in SKILL_LINE.finditer(request.system_prompt or "")}


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def skill_policy(request: ScriptRequest) -> AIMessage:
    """Read the skill whose name fits the request, then give the reply it prescribes."""
    read = next((m for m in reversed(request.messages) if isinstance(m, ToolMessage)), None)
    if read is None:
        wanted = words(request.last_human_text)
        for name, path in listed_skills(request).items():
            if words(name) <= wanted:
                return ai("", tool_call("read_file", {"file_path": path}))
        return ai("I have no skill for that.")
    reply = re.search(r"Reply: (.*)", read.text)
    return ai(reply[1] if reply else "I could not follow that skill.")


def model() -> ScriptedModel:
    return ScriptedModel(policy=skill_policy)


def outcome(llm: ScriptedModel, result: dict[str, Any], shown: dict[str, str]) -> dict:
    """What the model was offered and what it read; paths shortened for printing."""

    def short(path: str) -> str:
        for prefix, label in shown.items():
            path = path.replace(prefix, label)
        return path

    listed = {name: short(path) for name, path in listed_skills(llm.requests[0]).items()}
    reads = [short(c["args"]["file_path"]) for r in llm.requests for c in r.response.tool_calls]
    answer = result["messages"][-1].content
    print(f"  skills in the system prompt: {listed}")
    print(f"  read_file: {reads}")
    print(f"  answer: {answer}")
    return {"listed": listed, "reads": reads, "answer": answer, "result": result}


def precedence() -> dict[str, Any]:
    """Section 13.5."""
    print('skills=["/skills/user/", "/skills/project/"]:')
    llm = model()
    # If both sources contain a skill named "web-search",
    # the one from "/skills/project/" wins (loaded last).
    agent = create_deep_agent(
        model=llm,  # was: "google_genai:gemini-3.1-pro-preview"
        skills=["/skills/user/", "/skills/project/"],
    )
    result = agent.invoke(
        {
            "messages": [{"role": "user", "content": "Search the web for the latest release."}],
            "files": {path: create_file_data(text) for path, text in SECTION_13_5_FILES.items()},
        }
    )
    return outcome(llm, result, {})


def layering() -> dict[str, Any]:
    """Section 13.4: CLI-style layers passed explicitly, lowest priority first."""
    from fathom.backends import FilesystemBackend

    print("CLI-style layers, lowest priority first:")
    llm = model()
    with tempfile.TemporaryDirectory() as scratch:
        roots = {"home": Path(scratch) / "home", "project": Path(scratch) / "project"}
        for (root, relative), text in LAYER_FILES.items():
            target = roots[root] / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        user_home, project_root, agent_name = roots["home"], roots["project"], "my-agent"

        agent = create_deep_agent(
            model=llm,  # was: "google_genai:gemini-3.1-pro-preview"
            # Unconfined, asked for by name: the skill sources below are host paths, some
            # outside project_root (the user's home layers).
            backend=FilesystemBackend(root_dir=project_root, virtual_mode=False),
            skills=[
                f"{user_home}/.deepagents/{agent_name}/skills/",
                f"{user_home}/.agents/skills/",
                f"{project_root}/.deepagents/skills/",
                f"{project_root}/.agents/skills/",
            ],
        )
        result = agent.invoke(
            {"messages": [{"role": "user", "content": "Please do a code review of my change."}]}
        )
        shown = {str(user_home): "<user-home>", str(project_root): "<project-root>"}
        return outcome(llm, result, shown)


def main() -> dict[str, Any]:
    return {"precedence": precedence(), "layering": layering()}


if __name__ == "__main__":
    main()
