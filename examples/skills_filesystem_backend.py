"""Skills on local disk, read through `FilesystemBackend`, in the layout of section 13.3.

Deep Agents tutorial, section 3.7 (技能 / Skills, "文件系统bankend" [sic]), repeated in section
13.4 (使用 / Usage, FilesystemBackend), with the example layout of section 13.3 (例子):

    skills/
        ├── langgraph-docs
        │   └── SKILL.md
        └── arxiv_search
            ├── SKILL.md
            └── arxiv_search.py # code for searching arXiv

The agent gets `backend=FilesystemBackend(root_dir=<project>)`,
`skills=["<project>/skills/"]` (a host path: without `virtual_mode` the backend takes
absolute paths as real ones), approval for `write_file` / `edit_file` and a checkpointer.
Both skills are listed in the system prompt by name and description. Asked "What is
langgraph?", the model reads only `langgraph-docs/SKILL.md`; asked for arXiv papers, it reads
`arxiv_search/SKILL.md` and then the script that SKILL.md points to: supporting files are
read only when a skill says they are needed.

Ported to fathom: only the imports change (`deepagents` → `fathom`). The hosted model
becomes a `ScriptedModel` that picks the listed skill whose name fits the question, reads its
SKILL.md and follows it with the tools it has (no `fetch_url`, no shell: it says so).
`/Users/user/{project}` becomes a temporary directory, filled with the section 13.3 layout:
`langgraph-docs/SKILL.md` is the tutorial's text; the tutorial does not print
`arxiv_search/SKILL.md` or `arxiv_search.py`, so those two are written here (the script is
only read, never run, and nothing goes over the network). The second question is an
addition, to show a supporting file being used.

Run: `.venv/bin/python examples/skills_filesystem_backend.py`
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

# tutorial section 13.3
# The SKILL.md the tutorial fetches (its text as printed in tutorial section 13.3),
# kept beside the examples in the tutorial's skill-folder layout.
LANGGRAPH_DOCS_SKILL = (
    Path(__file__).parent / "skills" / "langgraph-docs" / "SKILL.md"
).read_text(encoding="utf-8")

# Not in the tutorial (it shows only the file names): written for this example.
ARXIV_SEARCH_SKILL = """---
name: arxiv_search
description: Search arXiv for research papers and preprints. Use it when the user asks for papers, preprints or recent research on a topic.
license: MIT
---

# arxiv_search

## Instructions

1. Read `arxiv_search.py` in this folder to see its options.
2. Run it with the topic as the query, e.g. `python arxiv_search.py "agent memory" --max 5`.
   It prints the title, first author, date and link of each match, newest first.
3. Give the user the most relevant papers with their links, and say how you searched.
"""  # noqa: E501

ARXIV_SEARCH_SCRIPT = '''"""Search arXiv: python arxiv_search.py QUERY [--max N]."""

import argparse
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

API = "https://export.arxiv.org/api/query"
ATOM = "{http://www.w3.org/2005/Atom}"


def search(query: str, max_results: int) -> list[dict]:
    params = {"search_query": f"all:{query}", "max_results": max_results,
              "sortBy": "submittedDate", "sortOrder": "descending"}
    with urllib.request.urlopen(f"{API}?{urllib.parse.urlencode(params)}") as response:
        feed = ET.fromstring(response.read())
    return [{"title": e.findtext(f"{ATOM}title", "").strip(),
             "author": e.findtext(f"{ATOM}author/{ATOM}name", ""),
             "date": e.findtext(f"{ATOM}published", "")[:10],
             "link": e.findtext(f"{ATOM}id", "")} for e in feed.iter(f"{ATOM}entry")]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("query")
    parser.add_argument("--max", type=int, default=5)
    args = parser.parse_args()
    for paper in search(args.query, args.max):
        print(f"{paper['date']}  {paper['title']} ({paper['author']})  {paper['link']}")
'''

LANGGRAPH_ANSWER = (
    "LangGraph is a low-level orchestration framework for building stateful, long-running "
    "agents as graphs of steps, with persistence, streaming and human-in-the-loop built in."
)

QUESTIONS = ["What is langgraph?", "Find recent arXiv papers on agent memory."]

SKILL_LINE = re.compile(r"^- (\S+) \(`(.+?SKILL\.md)`\): (.*)$", re.MULTILINE)


def listed_skills(request: ScriptRequest) -> dict[str, str]:
    """Skill name → SKILL.md path, as the skills section of the system prompt lists them."""
    return {m[1]: m[2] for m in SKILL_LINE.finditer(request.system_prompt or "")}


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def skill_policy(request: ScriptRequest) -> AIMessage:
    """Read the skill whose name fits the question, then follow it with the tools at hand."""
    turn = request.messages[
        max(i for i, m in enumerate(request.messages) if m.type == "human") :
    ]
    reads = [m for m in turn if isinstance(m, ToolMessage) and m.name == "read_file"]
    if not reads:
        question = words(request.last_human_text)
        for name, path in listed_skills(request).items():
            if words(name) & question:
                return ai("", tool_call("read_file", {"file_path": path}))
        return ai("I have no skill for that.")
    skill_text = reads[0].text
    if "fetch_url" in skill_text and not request.has_tool("fetch_url"):
        return ai(
            f"{LANGGRAPH_ANSWER} (The langgraph-docs skill says to fetch "
            "https://docs.langchain.com/llms.txt with fetch_url; this agent has no fetch_url "
            "tool, so this answer is not checked against the docs.)"
        )
    if "arxiv_search.py" in skill_text:
        call = next(
            c for m in turn if isinstance(m, AIMessage) for c in m.tool_calls
        )  # the read of SKILL.md: the script lies next to it
        script = call["args"]["file_path"].rsplit("/", 1)[0] + "/arxiv_search.py"
        if len(reads) == 1:
            return ai("", tool_call("read_file", {"file_path": script}))
        return ai(
            "The arxiv_search skill searches with its script: "
            f'`python {script} "agent memory" --max 5` lists the newest matching papers '
            "with their links. Running it needs a shell (an `execute` tool), which this "
            "agent does not have, so run that command and I will summarise the results."
        )
    return ai("Done, following the skill.")


def model() -> ScriptedModel:
    return ScriptedModel(policy=skill_policy)


def make_project(base: Path) -> Path:
    """`<base>/project/skills/` in the section 13.3 layout."""
    skills = base / "project" / "skills"
    (skills / "langgraph-docs").mkdir(parents=True)
    (skills / "arxiv_search").mkdir()
    (skills / "langgraph-docs" / "SKILL.md").write_text(LANGGRAPH_DOCS_SKILL, encoding="utf-8")
    (skills / "arxiv_search" / "SKILL.md").write_text(ARXIV_SEARCH_SKILL, encoding="utf-8")
    (skills / "arxiv_search" / "arxiv_search.py").write_text(
        ARXIV_SEARCH_SCRIPT, encoding="utf-8"
    )
    return base / "project"


def main() -> dict[str, Any]:
    from langgraph.checkpoint.memory import MemorySaver

    from fathom.backends.filesystem import FilesystemBackend

    llm = model()
    with tempfile.TemporaryDirectory() as scratch:
        project = make_project(Path(scratch))  # was: "/Users/user/{project}"

        # Checkpointer is REQUIRED for human-in-the-loop
        checkpointer = MemorySaver()

        agent = create_deep_agent(
            model=llm,  # was: "google_genai:gemini-3.1-pro-preview"
            # Unconfined, asked for by name: the skill source is a host path.
            backend=FilesystemBackend(root_dir=f"{project}", virtual_mode=False),
            skills=[f"{project}/skills/"],
            interrupt_on={
                "write_file": True,  # Default: approve, edit, reject
                "read_file": False,  # No interrupts needed
                "edit_file": True    # Default: approve, edit, reject
            },
            checkpointer=checkpointer,  # Required!
        )

        turns = []
        for question in QUESTIONS:
            seen = len(llm.requests)
            result = agent.invoke(
                {
                    "messages": [
                        {
                            "role": "user",
                            "content": question,
                        }
                    ]
                },
                config={"configurable": {"thread_id": "12345"}},
            )
            reads = [
                c["args"]["file_path"].removeprefix(f"{project}/")
                for r in llm.requests[seen:]
                for c in r.response.tool_calls
            ]
            print(f"Q: {question}")
            print(f"  read_file: {reads}")
            print(f"  paused for approval: {bool(result.get('__interrupt__'))}")
            answer = result["messages"][-1].content.replace(f"{project}/", "<project>/")
            print(f"  A: {answer}")
            turns.append({"question": question, "reads": reads, "result": result})

        prompt = llm.requests[0].system_prompt or ""
        listed = {
            name: path.removeprefix(f"{project}/")
            for name, path in listed_skills(llm.requests[0]).items()
        }
        print(f"skills in the system prompt: {listed}")
        print(f"skill bodies in the system prompt: {'## Instructions' in prompt}")
        return {
            "turns": turns,
            "listed": listed,
            "prompt": prompt,
            "project": str(project),
            "requests": llm.requests,
        }


if __name__ == "__main__":
    main()
