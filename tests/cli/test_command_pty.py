"""The real `fathom` command, end to end: spawned in a pty (pexpect) or as a subprocess, talking
over HTTP to a scripted model served by the test process (fixtures in conftest.py).

Covers the interactive session (approve / reject / edit at the prompt, plain and rich), Ctrl-C
during a run and the thread continuing afterwards, `--resume` in a new process, `fathom run`
(JSON output, pending approvals and their exit code), configuration errors, the no-model
message, `fathom demo` and `--help`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from fathom.testing import ScriptExhausted, ScriptRequest, ai, tool_call
from fathom.testing.scripted import Script

from .conftest import FATHOM, FathomProject, fathom_env, human_texts

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")

# --------------------------------------------------------------------------- the model

WRITE_TASK = "write notes.txt"
NOTES_CONTENT = "hello from fathom\n"
EDITED_CONTENT = "edited in the editor\n"
SLOW_TASK = "run the slow job"
DID_IT_FINISH = "did it finish?"
PLAN_TASK = "plan the work"
RECALL = "what did we do?"
FAIL_TASK = "fail, please"  # the model endpoint answers 500
ANSWER = "ANSWER:"  # every final answer starts with it
APPROVAL_PROMPT = "approve [y] / edit [e] / reject [n]? "


def _since_last_human(messages: list[BaseMessage]) -> list[BaseMessage]:
    last = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
    return messages[last + 1 :]


def _short(message: BaseMessage) -> str:
    return " ".join(str(message.content).split())[:120]


def policy(request: ScriptRequest) -> AIMessage:
    """One step of each task, decided from the request alone; every task ends in an answer."""
    task = request.last_human_text
    results = [m for m in _since_last_human(request.messages) if isinstance(m, ToolMessage)]
    if task == WRITE_TASK:
        if not results:
            return ai(
                "Writing notes.txt.",
                tool_call("write_file", {"file_path": "/notes.txt", "content": NOTES_CONTENT}),
            )
        return ai(f"{ANSWER} write_file said: {_short(results[-1])}")
    if task == SLOW_TASK:
        if not results:
            return ai("Starting the job.", tool_call("execute", {"command": "sleep 30"}))
        return ai(f"{ANSWER} the job said: {_short(results[-1])}")
    if task == DID_IT_FINISH:
        stopped = any(
            isinstance(m, ToolMessage) and "did not complete" in str(m.content)
            for m in request.messages
        )
        return ai(f"{ANSWER} no, it was stopped." if stopped else f"{ANSWER} yes, it finished.")
    if task == PLAN_TASK:
        if not results:
            todos = [
                {"content": "Survey the code", "status": "completed"},
                {"content": "Write the report", "status": "in_progress"},
            ]
            return ai("Planning.", tool_call("write_todos", {"todos": todos}))
        return ai(f"{ANSWER} planned two steps.")
    if task == FAIL_TASK:
        raise ScriptExhausted("scripted failure")  # a 500 the client does not retry
    if task == RECALL:
        earlier = human_texts(request.messages)[:-1]
        return ai(f"{ANSWER} earlier you said: {' | '.join(earlier) or 'nothing'}")
    return ai(f"{ANSWER} you said {task!r}")


@pytest.fixture
def scripted_policy() -> Script:
    return policy


# --------------------------------------------------------------------------- helpers


def _tool_messages(messages: list[BaseMessage], call_id: str) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == call_id]


def _call_id(fp: FathomProject, task: str, tool: str) -> str:
    """The id of the first `tool` call the model made for `task`."""
    for request in fp.requests_for(task):
        for call in request.response.tool_calls:
            if call["name"] == tool:
                return str(call["id"])
    raise AssertionError(f"the model never called {tool} for {task!r}")


def _last_request(fp: FathomProject) -> list[BaseMessage]:
    assert fp.model is not None and fp.model.requests, "the model received no request"
    return fp.model.requests[-1].messages


# --------------------------------------------------------------------------- approvals


@pytest.mark.timeout(90)
def test_approve_at_the_prompt_writes_the_file(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn("--plain")
    _thread, state = fp.banner(child)
    assert state == "new"
    fp.prompt(child)
    child.sendline(WRITE_TASK)
    child.expect_exact("approval needed: write_file")
    child.expect_exact(APPROVAL_PROMPT)
    shown = fp.transcript(child)
    assert "approval needed: write_file /notes.txt (new file, 1 line)" in shown
    assert f"  1  {NOTES_CONTENT.strip()}" in shown  # the new file's content, numbered
    assert "── waiting for approval" in shown
    assert not (fp.project / "notes.txt").exists(), "written before it was approved"

    child.sendline("y")
    child.expect_exact(f"model › {ANSWER} write_file said:")
    child.expect_exact("── done:")
    assert fp.leave(child) == 0

    assert (fp.project / "notes.txt").read_text(encoding="utf-8") == NOTES_CONTENT
    assert (fp.project / ".fathom" / "threads.sqlite").is_file()
    results = _tool_messages(_last_request(fp), _call_id(fp, WRITE_TASK, "write_file"))
    assert len(results) == 1 and "notes.txt" in str(results[0].content)


@pytest.mark.timeout(90)
def test_reject_with_a_reason_reaches_the_model(fathom_project: FathomProject) -> None:
    fp = fathom_project
    reason = "use notes.md instead, please"
    child = fp.spawn("--plain")
    fp.prompt(child)
    child.sendline(WRITE_TASK)
    child.expect_exact(APPROVAL_PROMPT)
    child.sendline("n")
    child.expect_exact("reason for the agent (optional): ")
    child.sendline(reason)
    child.expect(rf"model › {ANSWER} write_file said: [^\n]*{re.escape(reason)}")
    assert fp.leave(child) == 0

    assert not (fp.project / "notes.txt").exists(), "a rejected write_file wrote the file"
    results = _tool_messages(_last_request(fp), _call_id(fp, WRITE_TASK, "write_file"))
    assert len(results) == 1
    assert reason in str(results[0].content)


@pytest.mark.timeout(90)
def test_edit_in_editor_changes_what_is_written(
    fathom_project: FathomProject, tmp_path: Path
) -> None:
    fp = fathom_project
    editor = tmp_path / "editor.py"  # the editor gets the file's content, not JSON
    editor.write_text(
        "import sys\n"
        "path = sys.argv[1]\n"
        f"assert open(path, encoding='utf-8').read() == {NOTES_CONTENT!r}\n"
        f"open(path, 'w', encoding='utf-8').write({EDITED_CONTENT!r})\n",
        encoding="utf-8",
    )
    child = fp.spawn("--plain", env=fathom_env(fp.home, EDITOR=f"{sys.executable} {editor}"))
    fp.prompt(child)
    child.sendline(WRITE_TASK)
    child.expect_exact(APPROVAL_PROMPT)
    child.sendline("e")
    child.expect_exact(f"model › {ANSWER} write_file said:")
    assert fp.leave(child) == 0

    assert (fp.project / "notes.txt").read_text(encoding="utf-8") == EDITED_CONTENT
    # LangChain's HITL keeps the model's own call in the thread and tells the model, in the
    # tool's result, what ran instead.
    results = _tool_messages(_last_request(fp), _call_id(fp, WRITE_TASK, "write_file"))
    assert len(results) == 1
    assert "replaced this tool call" in str(results[0].content)
    assert json.dumps(EDITED_CONTENT) in str(results[0].content)


@pytest.mark.timeout(90)
def test_typed_ahead_text_does_not_answer_the_approval(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn("--plain")
    fp.prompt(child)
    # The message and a `y` in one write, as a paste or a fast typist sends them: the `y`
    # exists before the question does, so it must not approve anything.
    child.send(f"{WRITE_TASK}\ny\n")
    child.expect_exact(APPROVAL_PROMPT)
    child.sendline("n")
    answered = child.expect_exact(
        ["reason for the agent (optional): ", f"model › {ANSWER} write_file said:"]
    )
    assert answered == 0, "the typed-ahead `y` approved write_file before it was shown"
    child.sendline("")
    child.expect_exact(f"model › {ANSWER} write_file said:")
    assert fp.leave(child) == 0
    assert not (fp.project / "notes.txt").exists(), "a write nobody approved was made"


@pytest.mark.timeout(90)
def test_pasted_answer_at_the_prompt_is_asked_again(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn("--plain")
    fp.prompt(child)
    child.sendline(WRITE_TASK)
    child.expect_exact(APPROVAL_PROMPT)
    child.send("y\nand some more pasted text\n")  # a paste that starts with `y`
    child.expect_exact("that answer arrived together with more text")
    child.expect_exact(APPROVAL_PROMPT)
    assert not (fp.project / "notes.txt").exists()
    child.sendline("n")
    child.expect_exact("reason for the agent (optional): ")
    child.sendline("")
    child.expect_exact(f"model › {ANSWER} write_file said:")
    assert fp.leave(child) == 0
    assert not (fp.project / "notes.txt").exists()
    assert not fp.requests_for("and some more pasted text"), "the paste became a message"


@pytest.mark.timeout(180)  # two starts of the command: a hang bound, sized for a loaded machine
def test_piped_input_never_answers_an_approval(fathom_project: FathomProject) -> None:
    fp = fathom_project
    # Piped input is one task, run as `fathom run` runs it (so a `y` line would be part of
    # the task): the approval it reaches is left pending, never answered from the pipe.
    done = subprocess.run(
        [str(FATHOM), "--plain"], cwd=fp.project, env=fp.env, input=f"{WRITE_TASK}\n",
        capture_output=True, text=True, encoding="utf-8", timeout=100, check=False,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "waiting for approval of write_file" in done.stderr and "--auto-approve" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (fp.project / "notes.txt").exists(), "a `y` from the pipe approved the write"
    # The approval stays pending, to be answered in a terminal.
    thread = re.search(r"fathom --thread (\w+)", done.stderr)
    assert thread, done.stderr
    child = fp.spawn("--thread", thread.group(1), "--plain")
    child.expect_exact("approval needed: write_file")
    child.expect_exact(APPROVAL_PROMPT)
    child.sendline("y")
    child.expect_exact(f"model › {ANSWER} write_file said:")
    assert fp.leave(child) == 0
    assert (fp.project / "notes.txt").read_text(encoding="utf-8") == NOTES_CONTENT


@pytest.mark.timeout(90)
def test_rich_display_in_a_pty_answers_an_approval(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn()  # no --plain: RichDisplay and its live region, in a real terminal
    _thread, state = fp.banner(child)
    assert state == "new"
    fp.prompt(child)
    child.sendline(WRITE_TASK)
    child.expect_exact("approval needed: write_file")
    child.expect_exact(APPROVAL_PROMPT)
    child.sendline("y")
    child.expect_exact(f"{ANSWER} write_file said")
    child.expect_exact("✔ done")
    assert fp.leave(child) == 0

    assert "\x1b[" in child.logfile_read.getvalue(), "expected the rich display's escapes"
    shown = fp.transcript(child)
    assert "── run on thread" not in shown, "plain output without --plain"
    assert "? waiting for approval" in shown
    assert "Traceback" not in shown
    assert (fp.project / "notes.txt").read_text(encoding="utf-8") == NOTES_CONTENT


@pytest.mark.timeout(90)
def test_ctrl_c_at_the_approval_prompt_leaves_it_pending(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn("--plain")
    fp.prompt(child)
    child.sendline(WRITE_TASK)
    child.expect_exact(APPROVAL_PROMPT)
    child.sendintr()
    child.expect_exact("approval left pending; it is asked again when you continue this thread")
    fp.prompt(child)
    assert child.isalive()
    assert not (fp.project / "notes.txt").exists()

    # Continue the thread, as the message says: the approval comes first, then the message.
    child.sendline(RECALL)
    asked_again = child.expect([re.escape(APPROVAL_PROMPT), fp.PROMPT_RE]) == 0
    shown = fp.transcript(child)
    if not asked_again:
        child.close(force=True)
    assert asked_again, (
        "the approval was not asked again when the thread continued; the call was "
        "dropped as 'did not complete' instead:\n" + shown[-600:]
    )
    child.sendline("y")
    fp.prompt(child)
    assert (fp.project / "notes.txt").exists()
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    recall_turn = [r for r in fp.model.requests if r.messages[-1].type == "human"
                   and RECALL in str(r.messages[-1].content)]
    assert recall_turn, "the message typed before the approval was never sent"


# --------------------------------------------------------------------------- Ctrl-C


@pytest.mark.timeout(180)  # two starts of the command: a hang bound, sized for a loaded machine
def test_ctrl_c_stops_the_run_and_the_thread_continues(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn("--plain", "--sandbox", "local", "--auto-approve", "execute")
    thread, _ = fp.banner(child)
    fp.prompt(child)
    child.sendline(SLOW_TASK)
    child.expect_exact("call › execute")
    time.sleep(0.5)  # let `sleep 30` start
    child.sendintr()
    # A hang guard, not a speed claim: the interrupted `sleep 30` would end on its own later.
    child.expect(r"── interrupted: [^\n]*stopped by Ctrl-C", timeout=60)
    fp.prompt(child)
    assert child.isalive()

    child.sendline(DID_IT_FINISH)
    child.expect_exact(f"model › {ANSWER} no, it was stopped.")
    assert fp.leave(child) == 0

    # The model's request in the new turn holds a result for the cancelled call.
    call_id = _call_id(fp, SLOW_TASK, "execute")
    turn = fp.requests_for(DID_IT_FINISH)
    assert turn, "the model was not asked about the follow-up"
    results = _tool_messages(turn[0].messages, call_id)
    assert len(results) == 1, f"expected one result for {call_id}, got {results}"
    assert "did not complete" in str(results[0].content)
    assert human_texts(turn[0].messages) == [SLOW_TASK, DID_IT_FINISH]

    # The checkpoints are intact: a later `fathom run` on the thread sees all of it.
    done, payload = fp.run_json("--thread", thread, RECALL)
    assert done.returncode == 0, done.stderr
    assert payload["thread_id"] == thread
    assert payload["status"] == "done"
    assert payload["answer"] == f"{ANSWER} earlier you said: {SLOW_TASK} | {DID_IT_FINISH}"
    messages = payload["messages"]
    assert [m["content"] for m in messages if m["role"] == "human"] == [
        SLOW_TASK, DID_IT_FINISH, RECALL
    ]
    execute_results = [m for m in messages if m.get("tool_call_id") == call_id]
    assert len(execute_results) == 1
    assert "did not complete" in execute_results[0]["content"]
    assert messages[-1] == {"role": "ai", "content": payload["answer"]}


@pytest.mark.timeout(90)
def test_run_interrupted_exits_130(fathom_project: FathomProject) -> None:
    fp = fathom_project
    child = fp.spawn("run", "--plain", "--sandbox", "local", "--auto-approve", "execute",
                     SLOW_TASK)
    child.expect_exact("call › execute")
    time.sleep(0.5)
    child.sendintr()
    child.expect(r"── interrupted: [^\n]*stopped by Ctrl-C", timeout=60)  # bounds a hang
    assert fp.finish(child, timeout=60) == 130


# --------------------------------------------------------------------------- --resume


@pytest.mark.timeout(240)  # three starts of the command: a hang bound, sized for a loaded machine
def test_resume_in_a_new_process(fathom_project: FathomProject) -> None:
    fp = fathom_project
    first = fp.spawn("--plain", "--auto-approve", "write_file")
    thread, state = fp.banner(first)
    assert state == "new"
    fp.prompt(first)
    first.sendline(WRITE_TASK)
    first.expect_exact(f"model › {ANSWER} write_file said:")
    assert fp.leave(first) == 0
    assert "approval needed" not in fp.transcript(first)
    assert (fp.project / "notes.txt").read_text(encoding="utf-8") == NOTES_CONTENT

    second = fp.spawn("--resume", "--plain")
    assert fp.banner(second) == (thread, "resumed")
    fp.prompt(second)
    second.sendline(RECALL)
    second.expect_exact(f"model › {ANSWER} earlier you said: {WRITE_TASK}")
    fp.prompt(second)
    second.sendeof()  # Ctrl-D leaves too
    assert fp.finish(second) == 0

    turn = fp.requests_for(RECALL)
    assert turn, "the model was not asked in the resumed session"
    messages = turn[0].messages
    assert human_texts(messages) == [WRITE_TASK, RECALL]
    call_id = _call_id(fp, WRITE_TASK, "write_file")
    assert any(isinstance(m, AIMessage) and any(c["id"] == call_id for c in m.tool_calls)
               for m in messages)
    assert len(_tool_messages(messages, call_id)) == 1

    listed = fp.run("threads")
    assert listed.returncode == 0, listed.stderr
    rows = [line for line in listed.stdout.splitlines() if line.startswith(thread)]
    assert len(rows) == 1, listed.stdout
    assert WRITE_TASK in rows[0] and "openai:scripted" in rows[0]


# --------------------------------------------------------------------------- fathom run


@pytest.mark.timeout(90)
def test_run_json_reports_the_final_state(fathom_project: FathomProject) -> None:
    fp = fathom_project
    assert fp.model is not None
    done, payload = fp.run_json(PLAN_TASK)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.strip().splitlines()) == 1, "stdout must hold only the JSON"
    assert "── run on thread" in done.stderr  # progress goes to stderr
    assert payload["status"] == "done"
    assert payload["answer"] == f"{ANSWER} planned two steps."
    assert re.fullmatch(r"\w+", payload["thread_id"])
    assert [t["content"] for t in payload["todos"]] == ["Survey the code", "Write the report"]
    assert payload["pending_approvals"] == []
    usage = payload["usage"]
    requests = fp.model.requests
    assert usage["model_calls"] == len(requests) == 2
    assert usage["input_tokens"] == sum(r.input_tokens for r in requests)
    assert usage["output_tokens"] == sum(r.output_tokens for r in requests)
    assert usage["by_agent"]["fathom"]["calls"] == 2
    assert [m["role"] for m in payload["messages"]] == ["human", "ai", "tool", "ai"]
    assert payload["messages"][1]["tool_calls"][0]["name"] == "write_todos"


@pytest.mark.timeout(180)  # two starts of the command: a hang bound, sized for a loaded machine
def test_run_pending_approval_then_answered_interactively(
    fathom_project: FathomProject,
) -> None:
    fp = fathom_project
    done, payload = fp.run_json(WRITE_TASK)
    assert done.returncode == 3, done.stderr
    assert "write_file" in done.stderr
    thread = payload["thread_id"]
    assert f"fathom --thread {thread}" in done.stderr
    assert payload["status"] == "approval"
    [pending] = payload["pending_approvals"]
    assert (pending["name"], pending["index"]) == ("write_file", 0)
    assert not (fp.project / "notes.txt").exists()

    child = fp.spawn("--thread", thread, "--plain")
    assert fp.banner(child) == (thread, "resumed")
    child.expect_exact("approval needed: write_file")
    child.expect_exact(APPROVAL_PROMPT)
    # Asked before the first `› ` prompt.
    assert "\n› " not in fp.transcript(child)
    child.sendline("y")
    child.expect_exact(f"model › {ANSWER} write_file said:")
    assert fp.leave(child) == 0
    assert (fp.project / "notes.txt").read_text(encoding="utf-8") == NOTES_CONTENT


@pytest.mark.timeout(90)
def test_run_failed_exits_1(fathom_project: FathomProject) -> None:
    done, payload = fathom_project.run_json(FAIL_TASK)
    assert done.returncode == 1, done.stderr
    assert payload["status"] == "error"
    assert "scripted failure" in payload["detail"]
    assert "── failed" in done.stderr
    assert "Traceback" not in done.stderr


# --------------------------------------------------------------------------- setup errors

UNUSED_SERVER = 'model = "openai:scripted"\nbase_url = "http://127.0.0.1:9/v1"\n'


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param(
            {"fathom.toml": UNUSED_SERVER + "sandbox = local\n"},
            ["fathom.toml, line 3: invalid TOML"],
            id="invalid-toml",
        ),
        pytest.param(
            {"fathom.toml": UNUSED_SERVER + 'colour = "blue"\n'},
            ["fathom.toml, line 3: unknown key 'colour'", "allowed keys"],
            id="unknown-key",
        ),
        pytest.param(
            {"fathom.toml": UNUSED_SERVER, ".fathom/agents/x.md": "You review code.\n"},
            [".fathom/agents/x.md: it does not start with YAML front matter"],
            id="subagent-without-front-matter",
        ),
        pytest.param(
            {"fathom.toml": UNUSED_SERVER + 'auto_approve = ["wrte_file"]\n'},
            ["auto_approve", "'wrte_file' (did you mean 'write_file'?)", "write_todos"],
            id="misspelled-auto-approve",
        ),
        pytest.param(
            {"fathom.toml": UNUSED_SERVER + 'interrupt_on = ["tsk"]\n'},
            ["interrupt_on", "'tsk' (did you mean 'task'?)", "edit_file"],
            id="misspelled-interrupt-on",
        ),
    ],
)
def test_broken_configuration_exits_2_naming_the_file(
    bare_project: FathomProject, files: dict[str, str], expected: list[str]
) -> None:
    for name, text in files.items():
        bare_project.write(name, text)
    done = bare_project.run("run", "hello")
    assert done.returncode == 2, done.stderr
    for fragment in expected:
        assert fragment in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_misspelled_auto_approve_flag_exits_2_naming_the_tools(
    bare_project: FathomProject,
) -> None:
    bare_project.write("fathom.toml", UNUSED_SERVER)
    done = bare_project.run("run", "--auto-approve", "read_file,wrte_file", "hello")
    assert done.returncode == 2, done.stderr
    assert "--auto-approve names an unknown tool: 'wrte_file' (did you mean 'write_file'?)" in (
        done.stderr
    )
    assert "write_file" in done.stderr.split("tools are:")[1]
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.timeout(240)  # three starts of the command: a hang bound, sized for a loaded machine
def test_the_command_states_what_the_agent_can_reach(fathom_project: FathomProject) -> None:
    fp = fathom_project
    root = fp.project.resolve()
    done = fp.run("run", "--sandbox", "local", "hello")
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"files: {root} (confined"), done.stdout
    assert "commands: run UNSANDBOXED on this machine" in first
    assert done.stdout.splitlines()[-1] == f"{ANSWER} you said 'hello'"
    assert "LocalShellBackend" not in done.stderr  # said once, not again by the backend
    done, _payload = fp.run_json("hello")  # stdout holds the JSON only; this goes to stderr
    assert done.stderr.splitlines()[0].startswith(f"files: {root} (confined"), done.stderr
    assert "commands: none" in done.stderr.splitlines()[0]

    child = fp.spawn("--plain")
    fp.banner(child)
    assert fp.leave(child) == 0
    lines = fp.transcript(child).splitlines()
    statement = lines[1]  # right under the banner
    assert statement.startswith(f"files: {root} (confined"), lines[:3]
    assert "commands: none" in statement


def test_broken_configuration_in_an_interactive_session(bare_project: FathomProject) -> None:
    bare_project.write("fathom.toml", UNUSED_SERVER + "sandbox = local\n")
    child = bare_project.spawn("--plain")
    child.expect_exact("fathom.toml, line 3: invalid TOML")
    assert bare_project.finish(child) == 2
    assert "Traceback" not in bare_project.transcript(child)


def test_no_model_configured_explains_how_to_set_one(bare_project: FathomProject) -> None:
    done = bare_project.run()  # `fathom` in an empty project, no key in the environment
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 3, done.stderr
    assert "fathom.toml" in lines[0] and "OPENAI_API_KEY" in lines[1]
    assert "fathom demo" in lines[2]
    assert done.stdout == ""


# --------------------------------------------------------------------------- demo, help


@pytest.mark.timeout(90)
def test_demo_plain(bare_project: FathomProject) -> None:
    done = bare_project.run("demo", "--plain", timeout=80)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{APPROVAL_PROMPT}y" in done.stdout
    assert "approval needed: write_file" in done.stdout
    assert "GUIDE.md on disk:" in done.stdout
    assert "# calc: a guide" in done.stdout
    assert "error:" not in done.stdout


@pytest.mark.timeout(90)
def test_demo_rich_in_a_pty(bare_project: FathomProject) -> None:
    child = bare_project.spawn("demo", timeout=80)
    assert bare_project.finish(child, timeout=80) == 0
    shown = bare_project.transcript(child)
    assert "\x1b[" in child.logfile_read.getvalue(), "expected the rich display's escapes"
    assert "approval needed: write_file" in shown
    assert "GUIDE.md on disk:" in shown
    assert "Traceback" not in shown


def test_help_lists_the_subcommands(bare_project: FathomProject) -> None:
    done = bare_project.run("--help")
    assert done.returncode == 0
    for command in ("run", "threads", "demo"):
        assert re.search(rf"^\s+{command}\s", done.stdout, re.MULTILINE), done.stdout


def test_help_does_not_import_the_agent_stack() -> None:
    """main.py promises "Only the standard library is imported at start-up, so `fathom --help`
    is quick"; so importing `fathom.cli.main` must not import LangChain, LangGraph or rich."""
    code = (
        "import sys, fathom.cli.main\n"
        "heavy = {'langchain', 'langchain_core', 'langgraph', 'rich'}\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & heavy)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "", (
        f"importing fathom.cli.main imports {done.stdout.strip()} "
        "(src/fathom/__init__.py imports fathom.agent, and so LangChain)"
    )

