"""The examples in examples/ run, print what the tutorial prints, and do what they claim.

Each example is run twice: as a script in a subprocess (exit code and key output lines),
and imported from its path so the value `main()` returns can be checked.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES_DIR = ROOT / "examples"

# Every example, with lines its output must contain when run as a script.
EXAMPLES: dict[str, list[str]] = {
    "quickstart_research": ["## What is LangGraph?", "LangGraph is a low-level orchestration"],
    "model_with_retries": ["HTTP requests sent: 3 (2 failed with HTTP 500)", "hello!"],
    "custom_tools": ["Tools offered to the model:", "- LangGraph 1.0 released:"],
    "system_prompt": [
        "My instructions start with: 'You are an expert researcher.",
        "Sections added by middleware: Planning, Files",
    ],
    "custom_middleware": [
        "[Middleware] Tool call #1: get_weather",
        "[Middleware] Arguments: {'city': 'Paris'}",
        "[Middleware] Tool call #1 completed",
        "[Middleware] Tool call #2: get_weather",
        "[Middleware] Tool call #2 completed",
    ],
    "state_middleware": [
        "thread=alice x=1",
        "thread=alice x=2",
        "thread=bob x=1",
        "state x per thread: {'alice': 2, 'bob': 1}; shared self.x: 4",
    ],
    "create_agent_composed": [
        "Tools offered: ls, read_file, task, write_file, write_todos",
        "Researcher answered: LangGraph 1.0 shipped durable execution.",
        "Report: # LangGraph 1.0",
        "Answer: The report is in /report.md.",
    ],
    "default_backend": [
        "default backend:",
        "backend=StateBackend():",
        "'You asked me to remember: the deploy window is Friday 18:00 UTC.'",
        "'I have no note in this conversation.'",
        "same behaviour: True",
    ],
    "profiles": [
        "Prompt starts with: 'You are a helper.'",
        "Suffix present: True",
        "ls is described as: 'List a directory of the workspace.'",
        "grep offered: False",
    ],
    "profiles_config": [
        "Suffix present: True",
        "Tools hidden: True",
        "Helper listed: True",
    ],
    "human_in_the_loop": [
        "needs review: delete_file({'path': '/logs/app.log'}) "
        "allowed=['approve', 'edit', 'reject', 'respond']",
        "allowed=['approve', 'reject']",
        "- delete_file: Deleted /logs/app.log",
        "- send_email: not done (User rejected the tool call",
        "- delete_file: Deleted /tmp/cache",
        "- send_email: Sent email to ops@company.com",
    ],
    "structured_output": [
        "location='San Francisco, California' temperature=18.3 condition='Sunny' humidity=48 "
        "wind_speed=7.6 forecast='Pleasant sunny conditions expected to continue with "
        "temperatures around 64°F (18°C) during the day, dropping to around 52°F (11°C) at "
        "night. Clear skies with minimal precipitation expected.'"
    ],
    "filesystem_backend": [
        "write_file('/reports/summary.md') -> ok: Updated file /reports/summary.md",
        "read_file('/../outside.txt') -> error: Error: Path traversal not allowed: "
        "/../outside.txt",
        "read_file('/etc/passwd') -> error: Error: File '/etc/passwd' not found",
        "files on disk under the root: ['reports/summary.md']",
        "files outside the root unchanged: True",
        "secret leaked to the model: False",
    ],
    "store_backend": [
        "thread 1 (alice): 'Remember: green tea, no sugar' -> 'Saved to /preferences.md.'",
        "thread 2 (alice): 'What do I prefer?' -> 'You prefer: green tea, no sugar'",
        "thread 3 (bob): 'What do I prefer?' -> \"That did not work: Error: File "
        "'/preferences.md' not found\"",
        "DeprecationWarning: StoreBackend namespace factories now receive the LangGraph Runtime",
        "in the store: [(('alice',), '/preferences.md')]",
        "thread thread-a: 'What do I prefer?' -> 'You prefer: espresso'",
        "store namespaces: [('thread-a',), ('thread-b',)]",
        "AttributeError: 'NoneType' object has no attribute 'user'",
        "AttributeError: 'NoneType' object has no attribute 'assistant_id'",
        "store namespaces afterwards: [('thread-a',), ('thread-b',)]",
    ],
    "composite_backend": [
        "read_file(/memories/profile.md) -> 1 Alice prefers short answers.",
        "read_file(/workspace/draft.md) -> Error: File '/workspace/draft.md' not found",
        "in the store: [(('filesystem',), '/profile.md')]",
        "in thread 1's state: ['/workspace/draft.md']",
        "ls(/) -> /memories/ | /workspace/",
        "glob(**/*.md) -> /memories/agent.md | /workspace/plan.md",
        "in state: ['/workspace/plan.md']",
        "on disk: ['deepagents/myagent/agent.md']",
        "glob(**/*.md) -> /memories/agent.md | /memories/notes.md | /memories/projects/fathom.md",
        "on disk: ['deepagents/myagent/agent.md', 'deepagents/myagent/notes.md', "
        "'deepagents/projects/fathom.md']",
    ],
    "custom_backend": [
        "write_file -> error: Error: '/docs/guide.md' already exists.",
        "edit_file -> error: Error: String 'draft' appears 2 times in file. Add surrounding "
        "lines to make it unique, or set replace_all=True",
        "edit_file -> ok: Successfully replaced 2 instance(s) of the string in '/docs/guide.md'",
        "glob -> ok: /docs/api/index.md | /docs/guide.md",
        "grep -> ok: /docs/api/index.md: | 2: Status: draft",
        "read_file -> ok: 1 # Guide (final) | 2 Status: final | 3 Owner: Ana",
        "read_file -> error: Error: File '/docs/missing.md' not found",
        "glob -> ok: /docs/api/index.md | /docs/changelog.md | /docs/guide.md",
        "rows in the files table: ['/docs/api/index.md', '/docs/changelog.md', '/docs/guide.md']",
        "files in the graph state: []",
    ],
    "permissions": [
        "read_file  /policies/expenses.md          allowed",
        "write_file /policies/expenses-v2.md       denied",
        "edit_file  /policies/expenses.md          denied",
        "write_file /workspace/summary.md          allowed",
        "the model was told: Error: permission denied: changing '/policies/expenses-v2.md' is "
        "not allowed (rule 1: deny write /policies/**).",
        "rule order, bug:\n"
        "  read_file  /workspace/main.py             allowed\n"
        "  write_file /workspace/notes.md            allowed\n"
        "  read_file  /workspace/.env                allowed\n",
    ],
    "policy_hooks": [
        "write_file(/protected/new.md) -> error: Writes are not allowed under /protected/new.md",
        "edit_file(/protected/rules.md) -> error: Edits are not allowed under /protected/rules.md",
        "edit_file(/drafts/plan.md) -> ok: Successfully replaced 1 instance(s) of the string in "
        "'/drafts/plan.md'",
        "on disk: {'drafts/plan.md': 'Deploy on Tuesday.\\n', "
        "'protected/rules.md': 'No deploys on Friday.\\n'}",
        " ainvoke:",
    ],
    "backend_migration": [
        "before:\n  write_file -> ok: Updated file /notes.md\n  deprecation warnings: 1",
        "rt.context:\n  read_file -> ok: 1 call the bank\n  deprecation warnings: 0",
        "after:\n  read_file -> error: Error: could not read '/notes.md': the StoreBackend "
        "namespace factory failed with AttributeError: 'NoneType' object has no attribute "
        "'user' (rt.server_info is None: this run is not served by a LangGraph server",
        "give the namespace factory a fallback for local runs). The request itself is not the "
        "cause; retry once, and if it fails again tell the user.\n  deprecation warnings: 0",
        "store namespaces: [('alice',)]",
    ],
    "subagents_research": [
        "main agent (claude-sonnet-4-6): task(subagent_type='research-agent', "
        "description='How does LangGraph make long-running agents reliable?",
        "research-agent (openai:gpt-5.4): internet_search(query='How does LangGraph make "
        "long-running agents reliable?', max_results=3), internet_search(",
        "## Report: How does LangGraph make long-running agents reliable?",
        "research-agent's first request: 2 messages (system, human)",
        "main agent's messages: human, ai, tool, ai",
        "internet_search results the main agent saw: 0",
        "model calls: claude-sonnet-4-6: 2, openai:gpt-5.4: 2",
    ],
    "compiled_subagent": [
        "data-analyzer built with create_agent:\n  ToolMessage from data-analyzer: Mean 135, "
        "median 135, range 110-160; +33.3% from the first value to the last: the trend is up.",
        "data-analyzer built as a StateGraph and compiled:\n  ToolMessage from data-analyzer: "
        "Mean 135, median 135, range 110-160; +33.3% from the first value to the last: the "
        "trend is up.",
        "without .compile(): TypeError: Subagent 'data-analyzer': runnable must be a compiled "
        "graph",
        "state without 'messages': ValueError: Subagent 'data-analyzer': CompiledSubAgent must "
        "return a state containing a 'messages' key",
    ],
    "subagent_structured_output": [
        'ToolMessage from \'task\' (JSON):\n  {"summary":"Logical qubits',
        '"confidence":0.9,"sources":["https://example.org/quantum/error-correction-below-',
        "keys: ['confidence', 'sources', 'summary']",
        "valid ResearchFindings: True",
        "Confidence: 90%",
    ],
    "general_purpose_subagent": [
        "[gemini] main agent: task({'subagent_type': 'general-purpose', 'description': "
        "'调研量子计算的发展趋势'})",
        "general-purpose has its own system prompt: True",
        "general-purpose has the main agent's tools (without task, write_todos): True",
        "search results in the main agent's context: 0",
        "[gpt-5.4] general-purpose: internet_search(",
        "task tool lists: ['general-purpose: General-purpose agent for research and "
        "multi-step tasks']",
        "model calls: gemini 2, gpt-5.4 2",
        "task offered: False",
        "search results in the main agent's context: 3",
        "with a 'researcher' subagent, task lists: ['researcher: Researches a topic in depth']",
    ],
    "subagent_context": [
        "[researcher] get_user_data -> Data for user user-123: Look up my recent activity",
        "[main-agent] flexible_search -> 5 results:",
        "[researcher] flexible_search -> 3 results:",
        "[researcher] shared_lookup -> general lookup:",
        "[fact-checker] shared_lookup -> strict lookup (primary sources only):",
        "[fact-checker] verify_claim -> strict check of 'The Eiffel Tower is 500 m tall.': "
        "NOT verified",
        "model calls per agent (AgentUsage): {'main-agent': 3, 'researcher': 2, 'fact-checker': 4}",
        "[main-agent] depth_search -> 5 results:",
        "[researcher] depth_search -> 2 results:",
    ],
    "subagent_interrupts": [
        "[approve] main agent's read_file ran unreviewed: Contents of /logs/app.log",
        "[approve] paused: read_file({'path': '/logs/old.log'}) "
        "allowed=['approve', 'edit', 'reject', 'respond']",
        "[approve] resumed -> Done. file-manager: Contents of /logs/old.log",
        "[edit] resumed -> Done. file-manager: Contents of /logs/archive/old.log",
        "[reject] resumed -> Done. file-manager: User rejected the tool call for `read_file`",
        "Invoking agent - sub-agent will use request_approval tool...\n\n"
        "Interrupt received!\n"
        "  Type: approval_request\n"
        "  Action: deploying to production\n"
        "  Message: Please approve or reject: deploying to production\n\n"
        "Resuming with Command(resume={'approved': True})...\n\n"
        "Execution completed!\n"
        "  Tool result: Great! The approval request has been processed. The action "
        '**"deploying to production"** was **APPROVED**.',
        "Resuming with Command(resume={'approved': False, 'reason': 'change freeze'})...",
        '  Tool result: The action **"deploying to production"** was **REJECTED** (change freeze).',
    ],
    "subagent_streaming": [
        "[main agent] step: model\n  [tools:",
        "] step: tools",
        "Subagent complete: task\n  Result: AI safety research works on",
        "--- [main agent] ---\nDelegating to the researcher.",
        "--- [subagent: tools:",
        "lc_agent_name of main tokens: ['main-agent']",
        "lc_agent_name of subagent tokens: ['researcher']",
        "] {'status': 'starting', 'topic': 'customer satisfaction trends', 'progress': 0}",
        "[subagent] custom event: {'status': 'complete', 'progress': 100}",
        "[subagent] step: tools",
        "[main] step: tools",
    ],
    "subagent_fork": [
        "task description: 'Draft the reply to the customer.'",
        "fork's messages: ['system', 'human', 'ai', 'tool', 'human']",
        "same system prompt: True",
        "same tools: True",
        "share of the main agent's last request that starts the fork's: 1.000",
        "Dear customer, sorry for the delay. Order A-17: shipped 2 days late",
    ],
    "skills_state_backend": [
        "skills in the system prompt: ['langgraph-docs (/skills/langgraph-docs/SKILL.md)']",
        "skill body in the first system prompt: False",
        "tool calls: [\"read_file('/skills/langgraph-docs/SKILL.md')\"]",
        "skill body in the conversation after read_file: True",
        "answer: LangGraph is a low-level orchestration framework",
    ],
    "skills_store_backend": [
        "thread 12345:",
        "thread 67890:",
        "  skills in the system prompt: ['langgraph-docs (/skills/langgraph-docs/SKILL.md)']",
        "  skill body in the system prompt: False",
        "  read_file: ['/skills/langgraph-docs/SKILL.md']",
        "in the store: [(('filesystem',), '/skills/langgraph-docs/SKILL.md')]",
    ],
    "skills_filesystem_backend": [
        "Q: What is langgraph?",
        "  read_file: ['skills/langgraph-docs/SKILL.md']",
        "Q: Find recent arXiv papers on agent memory.",
        "  read_file: ['skills/arxiv_search/SKILL.md', 'skills/arxiv_search/arxiv_search.py']",
        "  paused for approval: False",
        "skills in the system prompt: {'arxiv_search': 'skills/arxiv_search/SKILL.md', "
        "'langgraph-docs': 'skills/langgraph-docs/SKILL.md'}",
        "skill bodies in the system prompt: False",
    ],
    "skills_precedence": [
        "  skills in the system prompt: {'summarize': '/skills/user/summarize/SKILL.md', "
        "'web-search': '/skills/project/web-search/SKILL.md'}",
        "  read_file: ['/skills/project/web-search/SKILL.md']",
        "  answer: Searching only the approved sources: docs.langchain.com and "
        "github.com/langchain-ai/langgraph/releases.",
        "  skills in the system prompt: {'code-review': "
        "'<project-root>/.agents/skills/code-review/SKILL.md', 'commit-message': "
        "'<user-home>/.agents/skills/commit-message/SKILL.md'}",
        "  answer: Reviewed with the project checklist: tests added, types checked, "
        "changelog updated.",
    ],
    "memory_agents_md": [
        "StateBackend (files passed to invoke):\n"
        "  > Please tell me what's in your memory files.\n"
        "    My memory files:\n"
        "    - /AGENTS.md: # Text-to-SQL Agent; Limit results to 5 rows",
        "    - /AGENTS.md: (not created yet; create it with write_file when there is something "
        "to keep)",
        "in the store: ['/AGENTS.md']; in the thread's state: ['/AGENTS.md']",
        "    - AGENTS.md: # Text-to-SQL Agent; Limit results to 5 rows",
        "paused for approval: edit_file({'file_path': 'AGENTS.md', 'old_string': 'Limit results "
        "to 5 rows', 'new_string': 'Limit results to 10 rows'})",
        "on disk now: 'Limit results to 10 rows'",
        "    - AGENTS.md: # Text-to-SQL Agent; Limit results to 10 rows",
    ],
    "memory_scopes": [
        "(not loaded: could not read '/memories/AGENTS.md': the StoreBackend namespace "
        "factory failed with AttributeError: 'NoneType' object has no attribute "
        "'assistant_id' (rt.server_info is None:",
        "[support-bot, user-bob] 'What do you know?'\n"
        "      From my memory: The team deploys on Tuesdays.",
        "From my memory: The team deploys on Tuesdays.; Releases need two approvals.",
        "[sales-bot, user-bob] 'What do you know?'\n      My memory is empty "
        "(/memories/AGENTS.md: (not created yet;",
        "in the store: [(('support-bot',), '/AGENTS.md')]",
        "[user-bob] 'What do you know?'\n      My memory is empty (/memories/preferences.md: "
        "(not created yet;",
        "[user-alice] 'What do you know?'\n      From my memory: I like answers as tables.",
        "in the store: [(('user-alice',), '/preferences.md')]",
        "'NoneType' object has no attribute 'user' (rt.server_info is None: this run is not "
        "served by a LangGraph server",
        "or give the namespace factory a fallback for local runs). The request itself is not "
        "the cause; retry once, and if it fails again tell the user.)). Which language?",
        "[user-alice] 'How do I read a CSV file?'\n      - Use the csv module:\n      ```python",
        "[user-bob] 'How do I read a CSV file?'\n      Reading a CSV file means splitting each "
        "line into fields. In TypeScript,",
        "langgraph-docs skill in the prompt: {'alice': True, 'bob': False}",
    ],
    "memory_org_policies": [
        "[thread 1] 'What is the internal price of the enterprise plan?'\n"
        "  -> I can't share internal pricing; the sales team can give you a quote. "
        "(This is not financial advice.)",
        "  -> I could not change that: Error: permission denied: changing "
        "'/policies/compliance.md' is not allowed (rule 1: deny write /policies/**).",
        "  -> Saved. (Updated file /memories/preferences.md)",
        "  -> - I can't share internal pricing;",
        "policy unchanged in the store: True",
        "in the store: [(('acme',), '/compliance.md'), (('user-alice',), '/preferences.md')]",
    ],
    "memory_long_term": [
        "[thread 1] 'I prefer dark mode and metric units.' -> I'll remember that. "
        "(Updated file /memories/user_preferences.txt)",
        "[thread 2] 'What are my preferences?' -> Your preferences (read from the file): "
        "dark mode and metric units\n      tools used: ['read_file']",
        "[thread 4] 'What are my preferences?' -> Your preferences (from memory): dark mode "
        "and metric units\n      tools used: none",
        "(Successfully replaced 1 instance(s) of the string in '/memories/user_preferences.txt')",
        "[thread 5] 'What are my preferences?' -> Your preferences (from memory): light mode "
        "and metric units\n      tools used: none",
        "in the store: {'/user_preferences.txt': 'light mode and metric units'}",
    ],
}


def load(name: str) -> ModuleType:
    """Import examples/<name>.py under a private module name."""
    module_name = f"fathom_example_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # pydantic / TypedDict annotations resolve through it
    spec.loader.exec_module(module)
    return module


def tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def tool_calls(state: dict[str, Any]) -> list[str]:
    return [
        call["name"] for m in state["messages"] if isinstance(m, AIMessage) for call in m.tool_calls
    ]


# --------------------------------------------------------------------------- bookkeeping


def test_every_example_file_has_tests():
    on_disk = sorted(p.stem for p in EXAMPLES_DIR.glob("*.py"))
    assert on_disk == sorted(EXAMPLES), "add new examples to EXAMPLES (and a test_<name>_main)"
    missing = [name for name in EXAMPLES if f"test_{name}_main" not in globals()]
    assert not missing, f"examples without a test of main(): {missing}"


def test_readme_lists_every_example():
    readme = (EXAMPLES_DIR / "README.md").read_text(encoding="utf-8")
    for name in EXAMPLES:
        assert f"`{name}.py`" in readme


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_runs_as_a_script(name):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.pop("FATHOM_MODEL", None)
    done = subprocess.run(
        [sys.executable, f"examples/{name}.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,  # bounds a hang: a loaded machine starts Python slowly
    )
    assert done.returncode == 0, done.stderr
    for line in EXAMPLES[name]:
        assert line in done.stdout, f"{line!r} not in output:\n{done.stdout}"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_has_a_docstring_naming_its_section(name):
    module = load(name)
    assert module.__doc__ and "tutorial" in module.__doc__ and "section" in module.__doc__
    assert callable(module.main)


# --------------------------------------------------------------------------- main() results


def test_quickstart_research_main():
    example = load("quickstart_research")
    state = example.main()

    assert state["todos"] and all(t["status"] == "completed" for t in state["todos"])
    notes = state["files"][example.NOTES_PATH]["content"]
    assert "LangGraph is a low-level orchestration framework" in notes
    calls = tool_calls(state)
    order = [calls.index(n) for n in ("write_todos", "internet_search", "write_file", "read_file")]
    assert order == sorted(order)
    answer = state["messages"][-1].content
    assert "LangGraph" in answer and "orchestration framework" in answer
    assert "https://docs.langchain.com/oss/python/langgraph/overview" in answer


def test_quickstart_offline_search_is_tavily_shaped():
    search = load("quickstart_research").internet_search
    found = search("What is langgraph?", max_results=2)
    assert len(found["results"]) == 2
    assert set(found["results"][0]) >= {"title", "url", "content"}
    assert "raw_content" not in found["results"][0]
    assert "raw_content" in search("langgraph", include_raw_content=True)["results"][0]
    news = search("langgraph", topic="news")["results"]
    assert [r["title"] for r in news] == ["LangGraph 1.0 released"]
    assert search("langgraph", topic="finance")["results"] == []


def test_model_with_retries_main():
    outcome = load("model_with_retries").main()
    assert outcome["http_requests"] == 3  # two HTTP 500s, then a success
    assert outcome["answered_requests"] == 1
    assert "hello!" in outcome["state"]["messages"][-1].content


def test_custom_tools_main():
    outcome = load("custom_tools").main()
    offered = set(outcome["tools_offered"])
    assert {"internet_search", "write_todos", "ls", "read_file", "write_file"} <= offered
    params = outcome["internet_search_schema"]["function"]["parameters"]
    assert params["required"] == ["query"]
    assert params["properties"]["topic"]["enum"] == ["general", "news", "finance"]
    search_call = next(
        c for m in outcome["state"]["messages"] if isinstance(m, AIMessage) for c in m.tool_calls
    )
    assert search_call["args"]["topic"] == "news"
    results = json.loads(tool_messages(outcome["state"])[0].content)["results"]
    assert [r["title"] for r in results] == [
        "LangGraph 1.0 released",
        "Deep Agents adds async subagents",
    ]
    assert "Chip makers" not in outcome["state"]["messages"][-1].content


def test_system_prompt_main():
    example = load("system_prompt")
    before = os.environ.get("OPENAI_BASE_URL")
    outcome = example.main()
    assert os.environ.get("OPENAI_BASE_URL") == before  # the example restores the environment
    prompt = outcome["system_prompt"]
    assert prompt.startswith(example.research_instructions.strip())
    assert prompt.index("## Planning") > len(example.research_instructions.strip())
    assert "## Files" in prompt
    assert "Planning, Files" in outcome["state"]["messages"][-1].content


def test_custom_middleware_main():
    outcome = load("custom_middleware").main()
    assert outcome["call_count"] == 2
    assert [m.content for m in tool_messages(outcome["state"])] == [
        "The weather in Paris is sunny.",
        "The weather in Tokyo is sunny.",
    ]


def test_state_middleware_main():
    outcome = load("state_middleware").main()
    assert outcome["x_by_run"] == [("alice", 1), ("alice", 2), ("bob", 1)]
    assert outcome["x_per_thread"] == {"alice": 2, "bob": 1}
    assert outcome["mutated_x"] == 4  # the self.x version counts across all threads


def test_default_backend_main():
    example = load("default_backend")
    outcome = example.main()
    for run in (outcome["default"], outcome["explicit"]):
        assert run["answers"] == [
            f"Saved to {example.NOTE_PATH}.",
            "You asked me to remember: the deploy window is Friday 18:00 UTC.",
            "I have no note in this conversation.",
        ]
        thread_1, thread_2 = run["files"]["1"], run["files"]["2"]
        assert thread_1[example.NOTE_PATH]["content"] == "the deploy window is Friday 18:00 UTC."
        assert thread_2 == {}


def test_human_in_the_loop_main():
    outcome = load("human_in_the_loop").main()

    # Conversation 1: one interrupt with both calls; delete_file approved, send_email rejected.
    clean_up = outcome["clean_up"]
    (review,) = clean_up["reviews"]
    assert [r["name"] for r in review["requests"]] == ["delete_file", "send_email"]
    assert review["requests"][0]["allowed_decisions"] == ["approve", "edit", "reject", "respond"]
    assert review["requests"][1]["allowed_decisions"] == ["approve", "reject"]
    assert [d["type"] for d in review["decisions"]] == ["approve", "reject"]
    assert not clean_up["interrupts_left"]
    results = {m.name: m for m in tool_messages(clean_up["state"])}
    assert results["read_file"].content == "Contents of /logs/app.log"  # not gated: ran at once
    assert results["delete_file"].content == "Deleted /logs/app.log"  # approved: ran
    assert results["send_email"].status == "error"  # rejected: did not run
    assert "Sent email" not in results["send_email"].content

    # Conversation 2: delete_file edited before it ran, then send_email approved.
    free_space = outcome["free_space"]
    first, second = free_space["reviews"]
    assert first["requests"][0]["args"] == {"path": "/tmp"}
    assert first["decisions"][0]["type"] == "edit"
    assert [r["name"] for r in second["requests"]] == ["send_email"]
    assert [d["type"] for d in second["decisions"]] == ["approve"]
    results = {m.name: m for m in tool_messages(free_space["state"])}
    assert results["delete_file"].content.endswith("Deleted /tmp/cache")
    assert "Deleted /tmp\n" not in results["delete_file"].content + "\n"
    assert results["send_email"].content == "Sent email to ops@company.com"
    assert not free_space["interrupts_left"]


def test_human_in_the_loop_warns_without_a_checkpointer():
    from fathom import create_deep_agent
    from fathom.testing import ScriptedModel

    example = load("human_in_the_loop")
    with pytest.warns(UserWarning, match="checkpointer"):
        create_deep_agent(
            model=ScriptedModel(policy=example.ops_policy),
            tools=[example.delete_file],
            interrupt_on={"delete_file": True},
        )


def test_structured_output_main():
    example = load("structured_output")
    state = example.main()
    report = state["structured_response"]
    assert isinstance(report, example.WeatherReport)
    assert report.location == "San Francisco, California"
    assert report.temperature == 18.3
    assert (report.condition, report.humidity, report.wind_speed) == ("Sunny", 48, 7.6)
    assert tool_calls(state)[0] == "internet_search"


# --------------------------------------------------------------------------- backends (§7)


def files_under(directory: Path) -> dict[str, str]:
    return {
        p.relative_to(directory).as_posix(): p.read_text(encoding="utf-8")
        for p in directory.rglob("*")
        if p.is_file()
    }


def test_filesystem_backend_main(tmp_path):
    example = load("filesystem_backend")
    cwd = os.getcwd()
    outcome = example.main(str(tmp_path))
    assert os.getcwd() == cwd  # the example changes back

    # The report is a real file under the root; outside.txt is untouched; nothing else exists.
    assert files_under(tmp_path) == {
        "outside.txt": example.SECRET,
        "project/reports/summary.md": example.REPORT,
    }
    assert outcome["on_disk"] == {"reports/summary.md": example.REPORT}
    assert not (ROOT / "reports").exists()

    write, outside, passwd = tool_messages(outcome["state"])
    assert write.status != "error"
    assert outside.status == "error"
    assert outside.content == "Error: Path traversal not allowed: /../outside.txt"
    assert passwd.status == "error" and "not found" in passwd.content
    assert all(
        example.SECRET.strip() not in str(m.content) and "root:" not in str(m.content)
        for m in outcome["state"]["messages"]
    )


def test_filesystem_backend_main_cleans_up():
    outcome = load("filesystem_backend").main()
    assert not Path(outcome["root"]).exists()


def test_store_backend_main():
    outcome = load("store_backend").main()
    assert outcome["answers"][:2] == [
        "Saved to /preferences.md.",
        "You prefer: green tea, no sugar",
    ]
    assert "not found" in outcome["answers"][2]  # bob does not see alice's file
    (deprecation,) = outcome["deprecations"]
    assert "ctx.runtime" in deprecation
    assert outcome["user_store"] == {(("alice",), "/preferences.md"): "green tea, no sugar"}

    assert outcome["thread_namespaces"] == [("thread-a",), ("thread-b",)]
    contents = {key: value["content"] for key, value in outcome["thread_store"].items()}
    assert contents == {
        (("thread-a",), "/preferences.md"): "espresso",
        (("thread-b",), "/preferences.md"): "rooibos",
    }
    errors = outcome["server_errors"]
    assert "namespace factory failed" in errors["per-user"] and "'user'" in errors["per-user"]
    assert "'assistant_id'" in errors["per-assistant"]


def test_composite_backend_main(tmp_path):
    outcome = load("composite_backend").main(str(tmp_path))

    # (a) /memories/ is in the store (seen from thread 2); /workspace/ only in thread 1's state.
    assert outcome["stored"] == {(("filesystem",), "/profile.md"): "Alice prefers short answers."}
    assert sorted(outcome["first"]["files"]) == ["/workspace/draft.md"]
    memory, draft = tool_messages(outcome["second"])
    assert memory.status != "error" and "Alice prefers short answers." in memory.content
    assert draft.status == "error" and "not found" in draft.content
    assert not outcome["second"].get("files")

    # (b) /memories/ is on disk under the route's root_dir; /workspace/ is in state.
    assert sorted(outcome["routed"]["files"]) == ["/workspace/plan.md"]
    *_, ls, glob = tool_messages(outcome["routed"])
    assert ls.content.split("\n") == ["/memories/", "/workspace/"]
    assert glob.content.split("\n") == ["/memories/agent.md", "/workspace/plan.md"]
    # The longer route /memories/projects/ wins over /memories/.
    assert files_under(tmp_path) == {
        "deepagents/myagent/agent.md": "The user likes numbered plans.",
        "deepagents/myagent/notes.md": "General note",
        "deepagents/projects/fathom.md": "fathom: port the backend examples",
    }
    assert outcome["on_disk"] == files_under(tmp_path)
    *_, glob = tool_messages(outcome["longest"])
    assert "/memories/projects/fathom.md" in glob.content.split("\n")


def test_custom_backend_main():
    example = load("custom_backend")
    outcome = example.main()
    assert outcome["rows"] == {
        "/docs/api/index.md": "# API\nStatus: draft\n",
        "/docs/changelog.md": "v1: first release\n",
        "/docs/guide.md": "# Guide (final)\nStatus: final\nOwner: Ana\n",
    }
    # Files live in the table, not in the graph state.
    assert not outcome["state"].get("files") and not outcome["async_state"].get("files")
    statuses = [m.status for m in tool_messages(outcome["state"])]
    assert [i for i, s in enumerate(statuses) if s == "error"] == [2, 4, 10]

    # The async methods the agent used under ainvoke come from BackendProtocol.
    from fathom.backends.protocol import BackendProtocol

    assert example.SQLiteBackend.awrite is BackendProtocol.awrite
    assert isinstance(example.SQLiteBackend(), BackendProtocol)


def test_custom_backend_follows_the_protocol():
    backend = load("custom_backend").SQLiteBackend()
    created = backend.write("/a/b.txt", "x x")
    assert (created.error, created.path, created.files_update) == (None, "/a/b.txt", None)
    assert backend.write("/a/b.txt", "again").error
    assert backend.edit("/a/b.txt", "x", "y").error  # not unique
    edited = backend.edit("/a/b.txt", "x", "y", replace_all=True)
    assert (edited.occurrences, edited.files_update) == (2, None)
    assert backend.read("/a/b.txt").file_data["content"] == "y y"
    assert backend.read("/nope.txt").error == "Error: File '/nope.txt' not found"
    assert backend.read("/../x").error  # a result, not an exception
    assert [e["path"] for e in backend.ls("/").entries] == ["/a/"]
    assert backend.ls("/a_").error  # `_` is not a LIKE wildcard here
    assert backend.glob("[z-a]").error
    assert [m["line"] for m in backend.grep("y", "/a").matches] == [1]


def test_permissions_main():
    outcome = load("permissions").main()

    policies = outcome["policies"]
    verdicts = [verdict for _, _, verdict in policies["rows"]]
    assert verdicts[:4] == ["allowed", "denied", "denied", "allowed"]
    # /memories/ is keyed by rt.server_info.user.identity: None outside LangGraph Server.
    assert "object has no attribute 'user'" in policies["rows"][4][2]
    assert policies["stored"] == {(("acme",), "/expenses.md"): load("permissions").POLICY}
    assert sorted(policies["state"]["files"]) == ["/workspace/summary.md"]

    a, d = "allowed", "denied"
    expected = {
        "workspace isolation": [a, a, a, a, d],
        "protect .env and examples/": [a, a, d, d, d],
        "read-only": [a, d, a, d, a],
        "deny all": [d, d, d, d, d],
        "rule order, correct": [a, a, d, a, d],
        "rule order, bug": [a, a, a, a, d],
    }
    results = outcome["rule_sets"]
    assert {name: [v for _, _, v in r["rows"]] for name, r in results.items()} == expected
    # Refused changes never reach the backend.
    read_only = results["read-only"]["state"]["files"]
    assert "/workspace/notes.md" not in read_only
    assert read_only["/workspace/examples/demo.py"]["content"] == "DEMO = 1\n"
    # The bug: the .env contents reach the model.
    env_result = tool_messages(results["rule order, bug"]["state"])[2]
    assert "API_KEY" in env_result.content
    assert "API_KEY" not in tool_messages(results["rule order, correct"]["state"])[2].content


def test_policy_hooks_main(tmp_path):
    outcome = load("policy_hooks").main(str(tmp_path))
    expected_rows = [
        ("/drafts/plan.md", "ok: Updated file /drafts/plan.md"),
        ("/protected/new.md", "error: Writes are not allowed under /protected/new.md"),
        ("/protected/rules.md", "error: Edits are not allowed under /protected/rules.md"),
        (
            "/drafts/plan.md",
            "ok: Successfully replaced 1 instance(s) of the string in '/drafts/plan.md'",
        ),
    ]
    assert outcome["guarded"]["rows"] == expected_rows
    assert files_under(tmp_path) == {
        "workspace/drafts/plan.md": "Deploy on Tuesday.\n",
        "workspace/protected/rules.md": "No deploys on Friday.\n",
    }
    for mode in ("invoke", "ainvoke"):
        wrapped = outcome["wrapped"][mode]
        assert wrapped["rows"] == expected_rows
        assert wrapped["files"] == {
            "/protected/rules.md": "No deploys on Friday.\n",
            "/drafts/plan.md": "Deploy on Tuesday.\n",
        }


def test_backend_migration_main():
    outcome = load("backend_migration").main()
    before, literal, after = outcome["before"], outcome["rt.context"], outcome["after"]
    assert before["result"].status != "error"
    assert len(before["deprecations"]) == 1 and "ctx.runtime" in before["deprecations"][0]
    assert literal["result"].status != "error" and "call the bank" in literal["result"].content
    assert literal["deprecations"] == []
    assert after["result"].status == "error" and after["deprecations"] == []
    assert "'NoneType' object has no attribute 'user'" in after["result"].content
    assert outcome["namespaces"] == [("alice",)]


# ------------------------------------------------------------ subagents (§8, §10.6, §16)


def results_sent(request: Any) -> list[ToolMessage]:
    """The tool results a recorded model request ended with (after its last AI message)."""
    results: list[ToolMessage] = []
    for message in reversed(request.messages):
        if isinstance(message, AIMessage):
            break
        if isinstance(message, ToolMessage):
            results.insert(0, message)
    return results


def task_calls(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        call["args"]
        for m in state["messages"]
        if isinstance(m, AIMessage)
        for call in m.tool_calls
        if call["name"] == "task"
    ]


def test_subagents_research_main():
    from langchain_core.messages import HumanMessage, SystemMessage

    outcome = load("subagents_research").main()
    state = outcome["state"]
    assert [m.type for m in state["messages"]] == ["human", "ai", "tool", "ai"]

    # Every main-agent answer came from the main model; the subagent ran on its override.
    main_requests, research_requests = outcome["main_requests"], outcome["research_requests"]
    assert len(main_requests) == 2 and len(research_requests) == 2
    for message in state["messages"]:
        if isinstance(message, AIMessage):
            assert message.response_metadata["model_name"] == "claude-sonnet-4-6"
    assert all(r.response.response_metadata["model_name"] == "gpt-5.4" for r in research_requests)
    (task,) = task_calls(state)
    assert task["subagent_type"] == "research-agent"

    # The subagent starts from its own system prompt and the task description, nothing else.
    first = research_requests[0]
    assert [type(m) for m in first.messages] == [SystemMessage, HumanMessage]
    assert first.system_prompt.startswith("You are a great researcher")
    assert first.messages[1].text == task["description"]
    assert outcome["question"] in task["description"]
    assert "internet_search" in first.tool_names and "task" not in first.tool_names
    assert [m.name for m in results_sent(research_requests[1])] == ["internet_search"] * 2

    # The main agent sees the report, never the raw search results.
    report = research_requests[-1].response.content
    assert tool_messages(state)[0].content == report
    assert "internet_search" not in main_requests[0].tool_names
    for request in main_requests:
        for message in request.messages:
            assert not (isinstance(message, ToolMessage) and message.name == "internet_search")
            assert '"score"' not in str(message.content)
    assert state["messages"][-1].content.endswith(report)
    assert "https://docs.langchain.com/oss/python/langgraph/durable-execution" in report


def test_compiled_subagent_main():
    example = load("compiled_subagent")
    outcome = example.main()
    verdict = (
        "Mean 135, median 135, range 110-160; +33.3% from the first value to the last: "
        "the trend is up."
    )
    for key in ("create_agent", "state_graph"):
        state = outcome[key]
        (task,) = task_calls(state)
        assert task["subagent_type"] == "data-analyzer"
        (result,) = tool_messages(state)
        assert (result.name, result.content) == ("task", verdict)
        assert state["messages"][-1].content == f"The data-analyzer's result: {verdict}"

    # create_agent's graph: the analyst model used the tool; only its last text came back.
    first, last = outcome["analyst_requests"]
    assert first.response.tool_calls[0]["name"] == "compute_statistics"
    assert first.response.tool_calls[0]["args"] == {"numbers": [120, 135, 150, 110, 160]}
    assert [m.name for m in results_sent(last)] == ["compute_statistics"]
    assert last.response.content == verdict
    assert '"mean"' not in str([m.content for m in outcome["create_agent"]["messages"]])

    refused = outcome["refused"]
    assert refused["uncompiled"].startswith("TypeError:") and ".compile()" in refused["uncompiled"]
    assert refused["no_messages"].startswith("ValueError:")
    assert "'messages'" in refused["no_messages"]


def test_subagent_structured_output_main():
    example = load("subagent_structured_output")
    outcome = example.main()
    message = outcome["tool_message"]
    assert message.name == "task"
    findings = example.ResearchFindings.model_validate_json(message.content)
    assert json.loads(message.content) == outcome["parsed"] == findings.model_dump()
    assert findings.confidence == 0.9 and 0 <= findings.confidence <= 1
    assert findings.sources == [
        "https://example.org/quantum/error-correction-below-threshold",
        "https://example.org/quantum/neutral-atom-arrays",
        "https://example.org/quantum/trapped-ion-logical-qubits",
    ]
    assert "below threshold" in findings.summary

    # The researcher was offered the schema as a tool; the main agent was not.
    prompt = example.research_subagent["system_prompt"]
    researcher = [r for r in outcome["requests"] if r.system_prompt.startswith(prompt)]
    main = [r for r in outcome["requests"] if not r.system_prompt.startswith(prompt)]
    assert researcher and all("ResearchFindings" in r.tool_names for r in researcher)
    assert main and all("ResearchFindings" not in r.tool_names for r in main)
    answer = outcome["state"]["messages"][-1].content
    assert "Confidence: 90%" in answer and findings.sources[2] in answer


def test_general_purpose_subagent_main():
    outcome = load("general_purpose_subagent").main()
    task = {"subagent_type": "general-purpose", "description": "调研量子计算的发展趋势"}

    default = outcome["default"]
    assert default["own_prompt"] and default["same_tools"]
    assert task_calls(default["state"]) == [task]
    assert not [m for m in tool_messages(default["state"]) if m.name == "internet_search"]
    assert len(default["requests"]) == 4  # main, subagent x2, main: all on the one model
    searched = default["requests"][1].response.tool_calls
    assert [c["name"] for c in searched] == ["internet_search"] * 3
    assert "post-quantum cryptography" in default["state"]["messages"][-1].content

    replaced = outcome["replaced"]
    assert replaced["catalogue"] == [
        "general-purpose: General-purpose agent for research and multi-step tasks"
    ]
    assert task_calls(replaced["state"]) == [task]
    assert all("task" in r.tool_names for r in replaced["main_requests"])
    assert len(replaced["subagent_requests"]) == 2
    for request in replaced["subagent_requests"]:
        assert request.system_prompt.startswith("You are a general-purpose assistant.")
        assert "task" not in request.tool_names
    main_calls = [c["name"] for r in replaced["main_requests"] for c in r.response.tool_calls]
    assert main_calls == ["task"]

    off = outcome["off"]
    assert "task" not in off["tools"] and "internet_search" in off["tools"]
    assert not task_calls(off["state"])
    assert [m.name for m in tool_messages(off["state"])] == ["internet_search"] * 3
    assert off["catalogue"] == ["researcher: Researches a topic in depth"]


def test_subagent_context_main():
    outcome = load("subagent_context").main()

    assert outcome["context"]["tool_rows"] == [
        ("researcher", "get_user_data", "Data for user user-123: Look up my recent activity")
    ]
    assert "user-123" in outcome["context"]["state"]["messages"][-1].content

    rows = outcome["fields"]["tool_rows"]
    by = {}
    for agent, tool, text in rows:
        by.setdefault((agent, tool), []).append(text)
    assert sorted(by) == [
        ("fact-checker", "shared_lookup"),
        ("fact-checker", "verify_claim"),
        ("main-agent", "flexible_search"),
        ("main-agent", "shared_lookup"),
        ("researcher", "flexible_search"),
        ("researcher", "shared_lookup"),
    ]
    assert by["main-agent", "flexible_search"][0].startswith("5 results")
    assert by["researcher", "flexible_search"][0].startswith("3 results")  # researcher_max_depth
    assert by["main-agent", "shared_lookup"][0].startswith("general lookup")
    assert by["researcher", "shared_lookup"][0].startswith("general lookup")
    assert all(t.startswith("strict lookup") for t in by["fact-checker", "shared_lookup"])
    verdicts = sorted(by["fact-checker", "verify_claim"])
    assert len(verdicts) == 2 and all(v.startswith("strict check") for v in verdicts)
    assert "NOT verified" in verdicts[0] and "verified, confirmed" in verdicts[1]
    assert outcome["fields"]["calls"] == {"main-agent": 3, "researcher": 2, "fact-checker": 4}

    assert sorted(outcome["namespaced"]["tool_rows"]) == [
        (
            "main-agent",
            "depth_search",
            "5 results: tower, Paris; finished 1889; World's Fair 1889; 330 m tall; G. Eiffel",
        ),
        ("researcher", "depth_search", "2 results: tower, Paris; finished 1889"),
    ]


def test_subagent_interrupts_main():
    outcome = load("subagent_interrupts").main()

    expected = {
        "approve": "file-manager: Contents of /logs/old.log",
        "edit": "file-manager: Contents of /logs/archive/old.log",
        "reject": "file-manager: User rejected the tool call for `read_file` with reason: "
        "Old logs stay closed.",
    }
    for kind, answer in expected.items():
        run = outcome["tool_calls"][kind]
        # The main agent's read_file ran at once; only the subagent's read paused.
        (reviewed,) = run["reviewed"]
        assert (reviewed["name"], reviewed["args"]) == ("read_file", {"path": "/logs/old.log"})
        main_read, task = tool_messages(run["state"])
        assert (main_read.name, main_read.content) == ("read_file", "Contents of /logs/app.log")
        assert (task.name, task.content) == ("task", answer)
        # main x2, file-manager (paused), file-manager after resume, main: no call repeated
        assert run["model_calls"] == 5

    approved = outcome["approved"]
    (pending,) = approved["first"].interrupts
    assert pending.value == {
        "type": "approval_request",
        "action": "deploying to production",
        "message": "Please approve or reject: deploying to production",
    }
    assert not approved["second"].interrupts
    model = approved["approval_model"]
    assert model.calls == 2  # the subagent's model is not asked again after the resume
    assert [m.text for m in results_sent(model.requests[1])] == [
        "Action 'deploying to production' was APPROVED. Proceeding..."
    ]
    task = tool_messages(approved["second"].value)[-1]
    assert task.name == "task" and "**APPROVED**" in task.content

    rejected = outcome["rejected"]
    assert rejected["first"].interrupts[0].value["type"] == "approval_request"
    tool_result = results_sent(rejected["approval_model"].requests[1])[0].text
    assert tool_result == ("Action 'deploying to production' was REJECTED. Reason: change freeze")
    assert "**REJECTED** (change freeze)" in tool_messages(rejected["second"].value)[-1].content


def test_subagent_streaming_main():
    example = load("subagent_streaming")
    outcome = example.main()

    # updates: the main agent at (), the subagent under one ("tools:<id>",) namespace
    updates = outcome["updates"]
    main_steps = [node for ns, node in updates if ns == ()]
    assert [n for n in main_steps if n in ("model", "tools")] == ["model", "tools", "model"]
    sub_namespaces = {ns for ns, _ in updates if ns}
    (sub_ns,) = sub_namespaces
    assert len(sub_ns) == 1 and sub_ns[0].startswith("tools:")
    assert sub_ns[0] != "tools:call_0_0"  # the task id, not the model's tool_call_id
    sub_steps = [node for ns, node in updates if ns and node in ("model", "tools")]
    assert sub_steps == ["model", "tools", "model"]

    # messages: tokens add up to each agent's answers; lc_agent_name names the agent
    messages = outcome["messages"]
    assert messages["text"] == {
        "main": "Delegating to the researcher."
        "Quantum error correction now makes logical qubits better than physical ones.",
        "subagent": "Saving my notes first." + example.SUMMARIES["quantum computing"],
    }
    assert messages["agent_names"] == {"main": {"main-agent"}, "subagent": {"researcher"}}

    # custom: the analyst's tool events, from the subagent's namespace
    custom = outcome["custom"]
    assert [data for _, data in custom] == [
        {"status": "starting", "topic": "customer satisfaction trends", "progress": 0},
        {"status": "analyzing", "progress": 50},
        {"status": "complete", "progress": 100},
    ]
    assert all(len(ns) == 1 and ns[0].startswith("tools:") for ns, _ in custom)

    # several modes at once
    multi = outcome["multi"]
    steps = [(source, what) for kind, source, what in multi if kind == "updates"]
    assert steps == [
        ("main", "model"),
        ("subagent", "model"),
        ("subagent", "tools"),
        ("subagent", "model"),
        ("main", "tools"),
        ("main", "model"),
    ]
    assert [s for kind, s, _ in multi if kind == "custom"] == ["subagent"] * 3
    assert {s for kind, s, _ in multi if kind == "messages"} == {"main", "subagent"}


def test_skills_state_backend_main():
    outcome = load("skills_state_backend").main()

    assert outcome["listed"] == ["langgraph-docs (/skills/langgraph-docs/SKILL.md)"]
    first = outcome["requests"][0].system_prompt
    assert "Use this skill for requests related to LangGraph" in first  # the description
    assert "### 1. Fetch the Documentation Index" not in first  # not the body
    assert not outcome["body_in_prompt"]
    assert outcome["calls"] == ["read_file('/skills/langgraph-docs/SKILL.md')"]
    assert outcome["body_read"]
    (read,) = tool_messages(outcome["result"])
    assert read.status != "error" and "https://docs.langchain.com/llms.txt" in read.content
    assert outcome["result"]["messages"][-1].content.startswith("LangGraph is a low-level")


def test_skills_store_backend_main():
    outcome = load("skills_store_backend").main()

    assert outcome["store_keys"] == [(("filesystem",), "/skills/langgraph-docs/SKILL.md")]
    for run in outcome["runs"]:  # a store is shared: every thread sees the skill
        assert run["listed"] == ["langgraph-docs (/skills/langgraph-docs/SKILL.md)"]
        assert run["reads"] == ["/skills/langgraph-docs/SKILL.md"]
        assert not run["body_in_prompt"]
        (read,) = tool_messages(run["result"])
        assert "### 1. Fetch the Documentation Index" in read.content
        assert "files" not in run["result"] or not run["result"]["files"]  # nothing in state


def test_skills_filesystem_backend_main():
    outcome = load("skills_filesystem_backend").main()

    assert outcome["listed"] == {
        "arxiv_search": "skills/arxiv_search/SKILL.md",
        "langgraph-docs": "skills/langgraph-docs/SKILL.md",
    }
    prompt = outcome["prompt"]
    assert "Search arXiv for research papers" in prompt
    assert "## Instructions" not in prompt and "urllib" not in prompt
    docs, arxiv = outcome["turns"]
    assert docs["reads"] == ["skills/langgraph-docs/SKILL.md"]
    assert arxiv["reads"] == [
        "skills/arxiv_search/SKILL.md",
        "skills/arxiv_search/arxiv_search.py",
    ]
    for turn in outcome["turns"]:
        assert "__interrupt__" not in turn["result"]  # read_file is not gated
    # the script reached the model only in the second turn, through read_file
    script_seen = ["urllib.request" in str(m.content) for m in arxiv["result"]["messages"]]
    assert sum(script_seen) == 1
    assert not any("urllib.request" in str(m.content) for m in docs["result"]["messages"])
    assert "needs a shell" in arxiv["result"]["messages"][-1].content


def test_skills_precedence_main():
    outcome = load("skills_precedence").main()

    precedence = outcome["precedence"]
    assert precedence["listed"] == {
        "summarize": "/skills/user/summarize/SKILL.md",
        "web-search": "/skills/project/web-search/SKILL.md",
    }
    assert precedence["reads"] == ["/skills/project/web-search/SKILL.md"]
    assert precedence["answer"].startswith("Searching only the approved sources")

    layering = outcome["layering"]
    assert layering["listed"] == {
        "code-review": "<project-root>/.agents/skills/code-review/SKILL.md",
        "commit-message": "<user-home>/.agents/skills/commit-message/SKILL.md",
    }
    assert layering["reads"] == ["<project-root>/.agents/skills/code-review/SKILL.md"]
    assert layering["answer"].startswith("Reviewed with the project checklist")


# --------------------------------------------------------------------------- memory


def memory_block(path: str, body: str) -> str:
    return f'<memory_file path="{path}">\n{body}\n</memory_file>'


def test_memory_agents_md_main(tmp_path):
    example = load("memory_agents_md")
    outcome = example.main(str(tmp_path))

    state = outcome["state"]
    assert "Limit results to 5 rows" in state["with_file"]["messages"][-1].content
    assert "not created yet" in state["without"]["messages"][-1].content  # another thread

    store = outcome["store"]
    assert store["stored"] == ["/AGENTS.md"]
    assert memory_block("/AGENTS.md", example.AGENTS_MD.strip("\n")) in store["prompt"]

    fs = outcome["filesystem"]
    assert fs["request"]["name"] == "edit_file"
    assert fs["request"]["args"]["file_path"] == "AGENTS.md"  # relative: under root_dir
    expected = example.AGENTS_MD.replace("to 5 rows", "to 10 rows")
    assert fs["on_disk"] == expected
    assert files_under(tmp_path) == {"AGENTS.md": expected}
    assert "Limit results to 5 rows" in fs["before"]["messages"][-1].content
    assert "Limit results to 10 rows" in fs["after"]["messages"][-1].content


def test_memory_scopes_main():
    # The example's local runs (no LangGraph server) cannot read the skill source; the
    # warning names the cause and the fixes instead of only the AttributeError.
    from fathom.middleware.skills import SkillWarning

    with pytest.warns(SkillWarning, match=r"rt\.server_info is None") as caught:
        outcome = load("memory_scopes").main()
    assert all("pass configurable 'assistant_id'" in str(w.message) for w in caught
               if issubclass(w.category, SkillWarning))

    agent = outcome["agent"]
    answers = agent["answers"]
    assert "no attribute 'assistant_id'" in answers["local"]  # no LangGraph Server config
    assert answers["bob"] == "From my memory: The team deploys on Tuesdays."
    assert answers["alice_later"] == (
        "From my memory: The team deploys on Tuesdays.; Releases need two approvals."
    )
    assert "not created yet" in answers["other"]  # another assistant, another namespace
    assert agent["stored"] == {
        (("support-bot",), "/AGENTS.md"): (
            "## Memory\n- The team deploys on Tuesdays.\n- Releases need two approvals.\n"
        )
    }

    user = outcome["user"]
    assert "not created yet" in user["answers"]["bob"]
    assert user["answers"]["alice"] == "From my memory: I like answers as tables."
    assert user["stored"] == {
        (("user-alice",), "/preferences.md"): "## Memory\n- I like answers as tables.\n"
    }

    isolated = outcome["isolated"]
    answers, prompts = isolated["answers"], isolated["prompts"]
    assert "no attribute 'user'" in answers["local"]
    assert answers["alice"].startswith("- Use the csv module") and "```python" in answers["alice"]
    assert "TypeScript" in answers["bob"] and "python" not in answers["bob"]
    assert "Likes concise bullet points" in prompts["alice"]
    assert "Likes detailed explanations" not in prompts["alice"]
    assert "Likes detailed explanations" in prompts["bob"]
    assert "Likes concise bullet points" not in prompts["bob"]
    assert "langgraph-docs" in prompts["alice"] and "langgraph-docs" not in prompts["bob"]


def test_memory_org_policies_main():
    example = load("memory_org_policies")
    outcome = example.main()

    (_, priced), (_, refused), (_, saved), (_, later) = outcome["answers"]
    assert priced.startswith("I can't share internal pricing")
    assert refused.startswith("I could not change that: Error: permission denied")
    assert saved == "Saved. (Updated file /memories/preferences.md)"
    assert later.startswith("- I can't share internal pricing")  # preference + policy
    assert outcome["stored"] == {
        (("acme",), "/compliance.md"): example.POLICIES,
        (("user-alice",), "/preferences.md"): "## Preferences\n- I like bullet points.\n",
    }


def test_memory_long_term_main():
    outcome = load("memory_long_term").main()

    assert memory_block(
        "/memories/user_preferences.txt",
        "(not created yet; create it with write_file when there is something to keep)",
    ) in outcome["first_prompt"]
    assert not tool_calls(outcome["answered"])  # answered from the system prompt
    prompts = [r.system_prompt for r in outcome["requests"]]
    assert memory_block("/memories/user_preferences.txt", "dark mode and metric units") in (
        prompts[2]
    )
    assert memory_block("/memories/user_preferences.txt", "light mode and metric units") in (
        prompts[-1]
    )
    assert outcome["stored"] == {"/user_preferences.txt": "light mode and metric units"}


def test_subagent_fork_main():
    outcome = load("subagent_fork").main()
    assert outcome["fraction"] == 1.0
    parent, fork = outcome["parent"], outcome["fork"]
    assert fork.canonical_json().startswith(parent.canonical_json()[: -len("]}]")])
    (answer,) = [m for m in tool_messages(outcome["state"]) if m.name == "task"]
    assert "carrier Parcelo" in answer.content  # known only from the inherited conversation


def test_profiles_main():
    from fathom.profiles import registry

    saved = dict(registry._HARNESS), dict(registry._PROVIDER)
    try:
        state = load("profiles").main()
        answer = state["messages"][-1].content
        assert "Suffix present: True" in answer and "grep offered: False" in answer
    finally:  # the example registers for every "openai" model; later tests must not see it
        for live, before in zip((registry._HARNESS, registry._PROVIDER), saved, strict=True):
            live.clear()
            live.update(before)


def test_profiles_config_main():
    from fathom.profiles import registry

    saved = dict(registry._HARNESS), dict(registry._PROVIDER)
    try:
        state = load("profiles_config").main()
        answer = state["messages"][-1].content
        assert answer.splitlines() == [
            "Suffix present: True", "Tools hidden: True", "Helper listed: True"]
    finally:  # the example registers for every "openai" model; later tests must not see it
        for live, before in zip((registry._HARNESS, registry._PROVIDER), saved, strict=True):
            live.clear()
            live.update(before)


def test_create_agent_composed_main():
    example = load("create_agent_composed")
    state = example.main()
    assert state["files"][example.REPORT_PATH]["content"].startswith("# LangGraph 1.0")
    task_answer = next(m for m in tool_messages(state) if m.name == "task")
    assert task_answer.content == "LangGraph 1.0 shipped durable execution."
    assert [t["status"] for t in state["todos"]] == ["in_progress", "pending"]
    assert tool_calls(state) == ["write_todos", "task", "write_file"]
