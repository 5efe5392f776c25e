"""Two conversations of one user change one memory file: no update is silently lost.

Two agents (two threads) share a `StoreBackend` namespace. The first reads the file and is
held, by an event, before it changes it; the second reads, changes and finishes; then the
first goes on with what it read. The interleaving is fixed by events, never by timing.
A stale `write_file` is refused with the file's current text, and the scripted model
re-applies its fact to that text; an `edit_file` whose `old_string` is still there applies
to the current text; one whose `old_string` is gone is told the file changed.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from fathom import create_deep_agent, create_file_data
from fathom.backends import StoreBackend
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

NS = ("user-1", "memories")
PATH = "/notes.md"
DEADLINE_S = 60.0
"""Bounds a hang only."""
CHANGED = "changed since you last read it"
NUMBERED = re.compile(r"^\s*\d+\t(.*)$")


def unnumbered(answer: str) -> str:
    """The file text inside a `read_file`-style answer (its numbered lines)."""
    lines = [m.group(1) for line in answer.splitlines() if (m := NUMBERED.match(line))]
    return "".join(line + "\n" for line in lines)


def no_gate() -> None:
    return None


def writer(fact: str, gate: Callable[[], None] = no_gate) -> ScriptedModel:
    """Reads the file, waits at `gate`, writes it back with `- fact` added; when told the
    file changed, writes the current text it was shown with the fact added."""

    def policy(request: ScriptRequest) -> Any:
        results = request.turn_results
        if not results:
            return ai("", tool_call("read_file", {"file_path": PATH}))
        last = results[-1]
        if last.name == "read_file":
            gate()
            content = unnumbered(last.text) + f"- {fact}\n"
            return ai("", tool_call("write_file", {"file_path": PATH, "content": content}))
        if last.status == "error" and CHANGED in last.text:
            content = unnumbered(last.text) + f"- {fact}\n"
            return ai("", tool_call("write_file", {"file_path": PATH, "content": content}))
        return "saved"

    return ScriptedModel(policy=policy)


def editor(old: str, new: str, gate: Callable[[], None] = no_gate,
           retry: tuple[str, str] | None = None) -> ScriptedModel:  # fmt: skip
    """Reads the file, waits at `gate`, replaces `old` with `new`; when told the file
    changed, makes the `retry` edit instead."""

    def policy(request: ScriptRequest) -> Any:
        results = request.turn_results
        if not results:
            return ai("", tool_call("read_file", {"file_path": PATH}))
        last = results[-1]
        args = None
        if last.name == "read_file":
            gate()
            args = {"file_path": PATH, "old_string": old, "new_string": new}
        elif last.status == "error" and CHANGED in last.text and retry is not None:
            args = {"file_path": PATH, "old_string": retry[0], "new_string": retry[1]}
            retry_used.append(True)
        return ai("", tool_call("edit_file", args)) if args else "saved"

    retry_used: list[bool] = []
    return ScriptedModel(policy=policy)


def agent_on(store: InMemoryStore, model: ScriptedModel, **options: Any) -> Any:
    return create_deep_agent(
        model, store=store, backend=StoreBackend(namespace=NS), checkpointer=InMemorySaver(),
        **options,
    )  # fmt: skip


def say(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def stored(store: InMemoryStore) -> str:
    item = store.get(NS, PATH)
    assert item is not None
    return item.value["content"]


def race(store: InMemoryStore, first: Callable[[Callable[[], None]], ScriptedModel],
         second: ScriptedModel, **options: Any) -> dict[str, Any]:  # fmt: skip
    """Run the first agent until it has read the file, the second to its end, then the
    first to its end; the first agent's final state."""
    first_read, second_done = threading.Event(), threading.Event()

    def gate() -> None:
        first_read.set()
        assert second_done.wait(DEADLINE_S), "the second conversation never finished"

    outcome: dict[str, Any] = {}

    def run_first() -> None:
        try:
            outcome["state"] = agent_on(store, first(gate), **options).invoke(
                say("remember"), {"configurable": {"thread_id": "first"}}
            )
        except BaseException as error:  # reported below
            outcome["error"] = error

    runner = threading.Thread(target=run_first)
    runner.start()
    try:
        assert first_read.wait(DEADLINE_S), "the first conversation never read the file"
        agent_on(store, second, **options).invoke(
            say("remember"), {"configurable": {"thread_id": "second"}}
        )
    finally:
        second_done.set()
        runner.join(DEADLINE_S)
    assert "error" not in outcome, outcome.get("error")
    return outcome["state"]


def tool_answers(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def preloaded(text: str) -> InMemoryStore:
    store = InMemoryStore()
    store.put(NS, PATH, dict(create_file_data(text)))
    return store


def test_a_stale_write_is_refused_with_the_current_text_and_both_facts_are_kept() -> None:
    store = preloaded("# Notes\n")
    state = race(store, lambda gate: writer("likes tea", gate), writer("lives in Lyon"))
    assert stored(store) == "# Notes\n- lives in Lyon\n- likes tea\n"
    answers = tool_answers(state)
    assert [a.name for a in answers] == ["read_file", "write_file", "write_file"]
    refused = answers[1]
    assert refused.status == "error"
    assert CHANGED in refused.text and "was not applied" in refused.text
    assert "- lives in Lyon" in refused.text  # the current text is shown
    assert answers[2].status != "error" and answers[2].text == f"Updated file {PATH}"


def test_a_stale_first_write_of_a_new_file_is_refused_too() -> None:
    store = InMemoryStore()

    def creator(fact: str, gate: Callable[[], None] = no_gate) -> ScriptedModel:
        def policy(request: ScriptRequest) -> Any:
            results = request.turn_results
            if not results:
                return ai("", tool_call("read_file", {"file_path": PATH}))
            last = results[-1]
            if last.name == "read_file":  # not found: create it
                gate()
                content = f"- {fact}\n"
            elif last.status == "error" and CHANGED in last.text:
                content = unnumbered(last.text) + f"- {fact}\n"
            else:
                return "saved"
            return ai("", tool_call("write_file", {"file_path": PATH, "content": content}))

        return ScriptedModel(policy=policy)

    state = race(store, lambda gate: creator("likes tea", gate), creator("lives in Lyon"))
    assert stored(store) == "- lives in Lyon\n- likes tea\n"
    assert CHANGED in tool_answers(state)[1].text


def test_an_edit_whose_old_string_is_still_there_applies_to_the_current_text() -> None:
    store = preloaded("# Notes\n")
    state = race(
        store,
        lambda gate: editor("# Notes\n", "# Notes\n- likes tea\n", gate),
        editor("# Notes\n", "# Notes\n- lives in Lyon\n"),
    )
    assert stored(store) == "# Notes\n- likes tea\n- lives in Lyon\n"
    edit = tool_answers(state)[-1]
    assert edit.status != "error"
    assert edit.text == f"Successfully replaced 1 instance(s) of the string in '{PATH}'"


def test_an_edit_whose_old_string_another_writer_changed_is_told_and_retried() -> None:
    store = preloaded("status: draft\n")
    state = race(
        store,
        lambda gate: editor("draft", "final", gate, retry=("review", "final")),
        editor("draft", "review"),
    )
    assert stored(store) == "status: final\n"
    answers = tool_answers(state)
    told = answers[1]
    assert told.status == "error" and CHANGED in told.text
    assert "status: review" in told.text
    assert answers[2].status != "error"


def test_one_writer_alone_gets_the_answers_it_always_got() -> None:
    store = preloaded("# Notes\n")
    state = agent_on(store, writer("likes tea")).invoke(
        say("remember"), {"configurable": {"thread_id": "alone"}}
    )
    answers = tool_answers(state)
    assert answers[0].text == "     1\t# Notes"
    assert answers[1].text == f"Updated file {PATH}"
    assert stored(store) == "# Notes\n- likes tea\n"


def blind_writer(content: str) -> ScriptedModel:
    """Writes `content` straight away each turn, without reading first."""

    def policy(request: ScriptRequest) -> Any:
        if request.turn_results:
            return "saved"
        return ai("", tool_call("write_file", {"file_path": PATH, "content": content}))

    return ScriptedModel(policy=policy)


def test_a_writer_may_write_again_over_its_own_write_but_not_over_anothers() -> None:
    store = InMemoryStore()
    agent = agent_on(store, blind_writer("- likes tea\n"))
    config = {"configurable": {"thread_id": "mine"}}
    agent.invoke(say("one"), config)
    again = agent.invoke(say("two"), config)  # its own write is the version it last saw
    assert tool_answers(again)[-1].text == f"Updated file {PATH}"
    StoreBackend(namespace=NS, store=store).write(PATH, "- lives in Lyon\n")  # another writer
    refused = tool_answers(agent.invoke(say("three"), config))[-1]
    assert refused.status == "error" and CHANGED in refused.text
    assert stored(store) == "- lives in Lyon\n"


def test_a_writer_that_never_saw_the_file_replaces_it_as_in_the_reference() -> None:
    store = preloaded("# Notes\n")
    agent_on(store, blind_writer("fresh\n")).invoke(
        say("one"), {"configurable": {"thread_id": "blind"}}
    )
    assert stored(store) == "fresh\n"


def memory_writer(fact: str, gate: Callable[[], None] = no_gate) -> ScriptedModel:
    """Writes the memory file as its prompt showed it, with `- fact` added, without reading
    it first; when told the file changed, writes the current text it was shown, plus the
    fact."""

    def policy(request: ScriptRequest) -> Any:
        results = request.turn_results
        if not results:
            gate()
            prompt = request.system_prompt or ""
            block = prompt.split(f'<memory_file path="{PATH}">\n', 1)[1]
            shown = block.split("\n</memory_file>")[0]
            before = "" if shown.startswith("(not created yet") else shown + "\n"
            content = before + f"- {fact}\n"
        elif results[-1].status == "error" and CHANGED in results[-1].text:
            content = unnumbered(results[-1].text) + f"- {fact}\n"
        else:
            return "saved"
        return ai("", tool_call("write_file", {"file_path": PATH, "content": content}))

    return ScriptedModel(policy=policy)


def test_two_conversations_creating_a_memory_file_seen_only_in_the_prompt_keep_both() -> None:
    store = InMemoryStore()
    state = race(
        store, lambda gate: memory_writer("likes tea", gate), memory_writer("lives in Lyon"),
        memory=[PATH],
    )  # fmt: skip
    assert stored(store) == "- lives in Lyon\n- likes tea\n"
    refused = tool_answers(state)[0]
    assert refused.status == "error" and CHANGED in refused.text


def test_a_memory_file_rewritten_from_the_prompt_keeps_the_other_conversations_fact() -> None:
    store = preloaded("# Notes\n")
    race(
        store, lambda gate: memory_writer("likes tea", gate), memory_writer("lives in Lyon"),
        memory=[PATH],
    )  # fmt: skip
    assert stored(store) == "# Notes\n- lives in Lyon\n- likes tea\n"
