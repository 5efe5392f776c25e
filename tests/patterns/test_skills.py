"""The skills pattern: one agent that loads skills on demand (`fathom.patterns.skills`).

Models are `ScriptedModel`s whose policies decide from what they are sent: whether a
skill's content is already in the conversation, which tools they see, and the tool
results since the last user message.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from fathom.patterns.skills import (
    Skill,
    SkillMiddleware,
    merge_skill_names,
    require_skill,
)
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call
from fathom.usage import AgentUsage

from .conftest import load_example

ROOT = Path(__file__).resolve().parents[2]


def _load_example(name: str) -> ModuleType:
    return load_example(name)


SQL = _load_example("sql_assistant")
SKILLS: list[Skill] = SQL.SKILLS
ORIGINAL = "You are a SQL query assistant that helps users write queries."


def ask(agent: Any, text: str, thread: str = "t1", **config: Any) -> dict[str, Any]:
    return agent.invoke(
        {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}, **config}
    )


async def aask(agent: Any, text: str, thread: str = "t1") -> dict[str, Any]:
    return await agent.ainvoke(
        {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}}
    )


def sql_agent(model: ScriptedModel, **kwargs: Any) -> Any:
    return create_agent(
        model, system_prompt=ORIGINAL, middleware=[SkillMiddleware(SKILLS)], **kwargs
    )


# --------------------------------------------------------------------------- catalogue


def test_catalog_is_appended_after_the_original_prompt_on_every_call() -> None:
    model = ScriptedModel(policy=SQL.sql_policy)
    agent = sql_agent(model)

    ask(agent, SQL.QUESTION)

    assert model.calls == 2  # load_skill, then the SQL
    for request in model.requests:
        prompt = request.system_prompt or ""
        assert prompt.startswith(ORIGINAL)
        assert prompt.count(ORIGINAL) == 1
        catalog = prompt[len(ORIGINAL):]
        assert catalog.startswith("\n\n## Available Skills\n\n")
        assert (
            "- **sales_analytics**: Schema and business rules for sales analysis" in catalog
        )
        assert "- **inventory_management**: Schema and business rules for inventory" in catalog
        system = request.messages[0]
        assert system.content_blocks[0]["text"] == ORIGINAL


def test_provider_fields_of_the_original_blocks_are_kept() -> None:
    model = ScriptedModel(policy=lambda request: "hi")
    cached = {"type": "text", "text": ORIGINAL, "cache_control": {"type": "ephemeral"}}
    agent = create_agent(
        model, system_prompt=SystemMessage(content=[cached]), middleware=[SkillMiddleware(SKILLS)]
    )

    ask(agent, "hello")

    first, catalog = model.requests[0].messages[0].content
    assert first == cached
    assert catalog["text"].startswith("\n\n## Available Skills")


def test_agent_without_a_system_prompt_gets_the_catalog_alone() -> None:
    model = ScriptedModel(policy=lambda request: "hi")
    agent = create_agent(model, middleware=[SkillMiddleware(SKILLS)])

    ask(agent, "hello")

    assert (model.requests[0].system_prompt or "").startswith("## Available Skills\n\n")


def test_skill_content_reaches_the_model_only_as_a_tool_message() -> None:
    model = ScriptedModel(policy=SQL.sql_policy)
    agent = sql_agent(model)

    result = ask(agent, SQL.QUESTION)

    content = SKILLS[0]["content"]
    marker = "High-value order: total_amount > 1000"
    assert marker in content
    assert all(marker not in (r.system_prompt or "") for r in model.requests)
    loaded = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert len(loaded) == 1
    assert loaded[0].text == f"Loaded skill: sales_analytics\n\n{content}"
    assert loaded[0].name == "load_skill"


def test_load_skill_description_is_derived_from_the_registry() -> None:
    model = ScriptedModel(policy=lambda request: "hi")
    ask(sql_agent(model), "hello")

    (schema,) = [t["function"] for t in model.requests[0].tools]
    assert schema["name"] == "load_skill"
    assert list(schema["parameters"]["properties"]) == ["skill_name"]
    for skill in SKILLS:
        assert f"- {skill['name']}: {skill['description']}" in schema["description"]


# --------------------------------------------------------------------------- the tutorial


def test_sales_question_loads_the_skill_then_writes_sql_by_its_rules() -> None:
    model = ScriptedModel(policy=SQL.sql_policy)
    agent = sql_agent(model)

    result = ask(agent, SQL.QUESTION)

    human, call, loaded, answer = result["messages"]
    assert isinstance(human, HumanMessage)
    assert [(tc["name"], tc["args"]) for tc in call.tool_calls] == [
        ("load_skill", {"skill_name": "sales_analytics"})
    ]
    assert isinstance(loaded, ToolMessage) and loaded.tool_call_id == call.tool_calls[0]["id"]
    assert isinstance(answer, AIMessage) and not answer.tool_calls
    assert "total_amount > 1000" in answer.text
    assert "status = 'completed'" in answer.text
    assert result["skills_loaded"] == ["sales_analytics"]


def test_unknown_skill_is_answered_with_the_list_not_an_exception() -> None:
    def policy(request: ScriptRequest) -> AIMessage | str:
        results = request.turn_results
        if not results:
            return ai("", tool_call("load_skill", {"skill_name": "nope"}))
        return f"Noted: {results[-1].text}"

    result = ask(sql_agent(ScriptedModel(policy=policy)), "Use the nope skill")

    message = result["messages"][2]
    assert isinstance(message, ToolMessage) and message.status == "error"
    assert message.text == (
        "Skill 'nope' not found. Available skills: sales_analytics, inventory_management"
    )
    assert result.get("skills_loaded", []) == []


# --------------------------------------------------------------------------- the gate


@tool
def write_sql_query(query: str, vertical: str, runtime: ToolRuntime) -> str:
    """Write a SQL query for a business vertical (its skill must be loaded)."""
    if error := require_skill(runtime.state, vertical):
        return error
    return f"SQL Query for {vertical}:\n\n```sql\n{query}\n```"


def gate_policy(request: ScriptRequest) -> AIMessage | str:
    """Try the query; if told to load a skill first, do that and try again."""
    results = request.turn_results
    write = tool_call("write_sql_query", {"query": "SELECT 1", "vertical": "sales_analytics"})
    if not results:
        return ai("", write)
    last = results[-1]
    fix = re.search(r"Call load_skill\('(\w+)'\) first", last.text)
    if fix:
        return ai("", tool_call("load_skill", {"skill_name": fix.group(1)}))
    if last.name == "load_skill":
        return ai("", write)
    return last.text


def test_gated_tool_refuses_before_the_skill_is_loaded_and_works_after() -> None:
    agent = create_agent(
        ScriptedModel(policy=gate_policy),
        tools=[write_sql_query],
        middleware=[SkillMiddleware(SKILLS)],
    )

    result = ask(agent, "Query sales")

    results = [m.text for m in result["messages"] if isinstance(m, ToolMessage)]
    assert results[0].startswith("Error: the 'sales_analytics' skill is not loaded")
    assert "Call load_skill('sales_analytics') first" in results[0]
    assert results[1].startswith("Loaded skill: sales_analytics\n\n")
    assert results[2] == "SQL Query for sales_analytics:\n\n```sql\nSELECT 1\n```"
    assert result["skills_loaded"] == ["sales_analytics"]


@pytest.mark.parametrize("use_async", [False, True])
async def test_requires_gates_a_tool_in_middleware_without_running_it(use_async: bool) -> None:
    runs: list[str] = []

    @tool
    def export_report(name: str) -> str:
        """Export a sales report."""
        runs.append(name)
        return f"exported {name}"

    def policy(request: ScriptRequest) -> AIMessage | str:
        results = request.turn_results
        export = tool_call("export_report", {"name": "q2"})
        if not results:
            return ai("", export)
        last = results[-1]
        if last.status == "error" and "load_skill('sales_analytics')" in last.text:
            return ai("", tool_call("load_skill", {"skill_name": "sales_analytics"}))
        if last.name == "load_skill":
            return ai("", export)
        return last.text

    agent = create_agent(
        ScriptedModel(policy=policy),
        tools=[export_report],
        middleware=[SkillMiddleware(SKILLS, requires={"export_report": "sales_analytics"})],
    )

    result = await aask(agent, "Export Q2") if use_async else ask(agent, "Export Q2")

    refused = result["messages"][2]
    assert isinstance(refused, ToolMessage) and refused.status == "error"
    assert refused.name == "export_report"
    assert runs == ["q2"]  # only the call after the load ran
    assert result["messages"][-1].text == "exported q2"


def test_require_skill_reads_the_state() -> None:
    assert require_skill({"skills_loaded": ["a"]}, "a") is None
    assert require_skill({}, "a") is not None
    assert require_skill(None, "a") is not None


# --------------------------------------------------------------------------- skills_loaded


def test_merge_skill_names_keeps_first_load_order_without_duplicates() -> None:
    assert merge_skill_names(None, ["a"]) == ["a"]
    assert merge_skill_names(["a"], ["b"]) == ["a", "b"]
    assert merge_skill_names(["a", "b"], ["a", "c", "c"]) == ["a", "b", "c"]
    assert merge_skill_names(["a"], None) == ["a"]


def load_each_named_policy(request: ScriptRequest) -> AIMessage | str:
    """Load every skill named in the user's message (all in one message), then stop."""
    if request.turn_results:
        return "loaded"
    names = re.findall(r"\b(sales_analytics|inventory_management)\b", request.last_human_text)
    return ai("", *(tool_call("load_skill", {"skill_name": n}) for n in names))


def test_loading_a_second_skill_keeps_the_first_across_turns() -> None:
    agent = sql_agent(ScriptedModel(policy=load_each_named_policy), checkpointer=InMemorySaver())

    ask(agent, "load sales_analytics")
    second = ask(agent, "load inventory_management")
    third = ask(agent, "load sales_analytics")  # reloading lists it once

    assert second["skills_loaded"] == ["sales_analytics", "inventory_management"]
    assert third["skills_loaded"] == ["sales_analytics", "inventory_management"]


@pytest.mark.parametrize("use_async", [False, True])
async def test_parallel_loads_in_one_step_keep_both_in_call_order(use_async: bool) -> None:
    agent = sql_agent(ScriptedModel(policy=load_each_named_policy))
    text = "load sales_analytics and inventory_management"

    result = await aask(agent, text) if use_async else ask(agent, text)

    assert result["skills_loaded"] == ["sales_analytics", "inventory_management"]
    loaded = [m.text.splitlines()[0] for m in result["messages"] if isinstance(m, ToolMessage)]
    assert loaded == ["Loaded skill: sales_analytics", "Loaded skill: inventory_management"]


# --------------------------------------------------------------------------- call counts

COFFEE: Skill = {
    "name": "coffee",
    "description": "How to order coffee for the user.",
    "content": "Coffee manual: call buy_coffee once, then confirm the order number.",
}


def coffee_policy(request: ScriptRequest) -> AIMessage | str:
    """Load the manual unless it is in the conversation; then buy; then confirm."""
    results = request.turn_results
    if any(r.name == "buy_coffee" for r in results):
        return f"Done: {results[-1].text}"
    manual_loaded = any(
        isinstance(m, ToolMessage) and m.text.startswith("Loaded skill: coffee\n\n")
        for m in request.messages
    )
    if not manual_loaded:
        return ai("", tool_call("load_skill", {"skill_name": "coffee"}))
    return ai("", tool_call("buy_coffee"))


def coffee_agent(checkpointer: Any) -> tuple[Any, list[str]]:
    orders: list[str] = []

    @tool
    def buy_coffee() -> str:
        """Order one coffee."""
        orders.append(f"C-{len(orders) + 1:03d}")
        return f"Coffee ordered: order #{orders[-1]}"

    agent = create_agent(
        ScriptedModel(policy=coffee_policy),
        tools=[buy_coffee],
        system_prompt="You are a helpful assistant.",
        middleware=[SkillMiddleware([COFFEE])],
        checkpointer=checkpointer,
        name="assistant",
    )
    return agent, orders


def test_buy_coffee_costs_three_calls_then_two_when_repeated_in_the_thread(
    tmp_path: Path,
) -> None:
    usage = AgentUsage()
    with SqliteSaver.from_conn_string(str(tmp_path / "threads.db")) as saver:
        agent, orders = coffee_agent(saver)
        first = ask(agent, "Buy coffee", thread="t2", callbacks=[usage])
        assert usage.total().calls == 3
        second = ask(agent, "Buy coffee again", thread="t2", callbacks=[usage])

    assert usage.total().calls == 5
    assert usage.totals()["assistant"].calls == 5
    assert orders == ["C-001", "C-002"]
    assert first["messages"][-1].text == "Done: Coffee ordered: order #C-001"
    turn2 = second["messages"][len(first["messages"]):]
    assert [tc["name"] for m in turn2 if isinstance(m, AIMessage) for tc in m.tool_calls] == [
        "buy_coffee"
    ]


def test_a_new_thread_has_to_load_the_skill_again() -> None:
    usage = AgentUsage()
    agent, _ = coffee_agent(InMemorySaver())

    ask(agent, "Buy coffee", thread="a", callbacks=[usage])
    ask(agent, "Buy coffee again", thread="b", callbacks=[usage])

    assert usage.total().calls == 6


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("skills", "kwargs", "error", "message"),
    [
        ([], {}, ValueError, "at least one skill"),
        ([COFFEE, COFFEE], {}, ValueError, "unique; 'coffee' is given twice"),
        ([{**COFFEE, "content": " "}], {}, ValueError, "non-empty string 'content'"),
        ([{"name": "x", "description": "d"}], {}, ValueError, "non-empty string 'content'"),
        (["coffee"], {}, TypeError, "expected a Skill dict"),
        ([COFFEE], {"requires": {"buy_tea": "tea"}}, ValueError, "not registered: ['tea']"),
    ],
)
def test_bad_skill_registries_are_refused_with_the_fix(
    skills: Any, kwargs: dict[str, Any], error: type, message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        SkillMiddleware(skills, **kwargs)


# --------------------------------------------------------------------------- the guard


def test_read_only_guard() -> None:
    assert SQL.guard("DELETE FROM orders") == "Error: only read-only queries (SELECT) allowed"
    assert SQL.guard("drop table customers") == "Error: only read-only queries (SELECT) allowed"
    assert SQL.guard("SELECT * FROM payroll") == (
        "Error: not allowed to access these tables: ['payroll']"
    )
    assert SQL.guard(
        "SELECT c.name FROM customers c JOIN orders o ON c.customer_id = o.customer_id"
    ) is None


# --------------------------------------------------------------------------- the example


def test_sql_assistant_example_runs_as_a_script() -> None:
    done = subprocess.run(
        [sys.executable, "examples/patterns/sql_assistant.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=100, check=False,
    )
    assert done.returncode == 0, done.stderr
    for line in [
        "AI -> load_skill({'skill_name': 'sales_analytics'})",
        "Tool[load_skill]: Loaded skill: sales_analytics",
        "Tool[run_sql_query]: 2 rows:",
        "{'customer_id': 1, 'name': 'Ada Lovelace', 'email': 'ada@example.com', "
        "'customer_tier': 'gold'}",
        "Tool[run_sql_query]: Error: only read-only queries (SELECT) allowed",
        "cancelled orders still in the database: 1",
        "model calls: turn 1 = 3, turn 2 = 2",
    ]:
        assert line in done.stdout


def test_sql_assistant_example_main_reports_what_happened() -> None:
    report = SQL.main()

    assert [row["name"] for row in report["rows"]] == ["Ada Lovelace", "Grace Hopper"]
    assert report["tool_calls"] == ["load_skill", "run_sql_query", "run_sql_query"]
    assert "o.total_amount > 1000" in report["queries"][0]
    assert "o.status = 'completed'" in report["queries"][0]
    assert report["queries"][1].startswith("DELETE")
    assert report["guard_errors"] == ["Error: only read-only queries (SELECT) allowed"]
    assert report["cancelled_orders_left"] == 1
    assert report["skills_loaded"] == ["sales_analytics"]
    assert (report["turn1_calls"], report["turn2_calls"]) == (3, 2)


def test_run_sql_query_refuses_before_the_skill_and_runs_read_only(tmp_path: Path) -> None:
    db = tmp_path / "shop.db"
    SQL.create_database(db)

    def policy(request: ScriptRequest) -> AIMessage | str:
        results = request.turn_results
        if not results:
            return ai("", tool_call("run_sql_query", {
                "query": "SELECT COUNT(*) AS n FROM customers", "vertical": "sales_analytics"}))
        return results[-1].text

    agent = SQL.build_agent(ScriptedModel(policy=policy), db)
    assert ask(agent, "count")["messages"][-1].text.startswith(
        "Error: the 'sales_analytics' skill is not loaded"
    )
