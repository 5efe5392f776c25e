"""SQL assistant with skills: one agent loads a database skill, then queries by its rules.

LangChain's SQL-assistant-with-skills tutorial (multi-agent docs). The agent's system prompt
carries only a catalogue of two skills (`sales_analytics`, `inventory_management`);
`SkillMiddleware` appends it to every model call and adds the `load_skill` tool. Asked for
"customers who made orders over $1000 in the last month", the agent loads `sales_analytics`,
whose schema and business rules (revenue counts only `completed` orders, high value means
`total_amount > 1000`) reach it as a tool result, and writes SQL that follows them.

The query runs through `run_sql_query`, a tool that
- refuses until the skill for its `vertical` is loaded (`require_skill`),
- passes the tutorial's read-only guard (no INSERT/UPDATE/DELETE/DROP/ALTER/TRUNCATE, only
  the tables `customers`, `orders`, `order_items`),
- runs the query on a real SQLite database this example creates with sample rows
  (opened read-only) and returns the rows.

A second turn in the same thread asks to delete the cancelled orders: the skill is still
in the conversation, so it is not loaded again, and the guard refuses the DELETE.

The `inventory_management` content below is INVENTED for this example (tables after the
tutorial's); the sales content follows the tutorial, with its date arithmetic written for
SQLite.

Run: `.venv/bin/python examples/patterns/sql_assistant.py`
or with a real model: `... sql_assistant.py --model openai:gpt-4.1-mini`
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import tempfile
from contextlib import closing
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain.chat_models import init_chat_model
from langchain.tools import ToolRuntime
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Checkpointer

from fathom.patterns.skills import Skill, SkillMiddleware, require_skill
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call
from fathom.usage import AgentUsage

SALES_CONTENT = """# Sales analytics (SQLite)

## Tables
- customers(customer_id INTEGER PRIMARY KEY, name, email, signup_date, status, customer_tier)
- orders(order_id INTEGER PRIMARY KEY, customer_id, order_date, status, total_amount, sales_region)
  status is one of: pending, completed, cancelled, refunded
- order_items(item_id INTEGER PRIMARY KEY, order_id, product_id, quantity, unit_price, discount_percent)

Dates are ISO text (YYYY-MM-DD). For "last month" use: order_date >= date('now', '-1 month')

## Business logic
- Active customer: status = 'active' AND signup_date <= date('now', '-90 days')
- Revenue: count only completed orders: status = 'completed'. total_amount already includes discounts.
- Customer lifetime value (CLV): the sum of a customer's completed order amounts.
- High-value order: total_amount > 1000

## Example query: top 10 customers by revenue last quarter
SELECT c.customer_id, c.name, SUM(o.total_amount) AS revenue
FROM customers c JOIN orders o ON c.customer_id = o.customer_id
WHERE o.status = 'completed' AND o.order_date >= date('now', '-3 months')
GROUP BY c.customer_id, c.name ORDER BY revenue DESC LIMIT 10
"""  # noqa: E501

INVENTORY_CONTENT = """# Inventory management (SQLite) - INVENTED example content

## Tables
- products(product_id INTEGER PRIMARY KEY, product_name, sku, category, unit_cost, reorder_point, discontinued)
- warehouses(warehouse_id INTEGER PRIMARY KEY, warehouse_name, location, capacity)
- inventory(product_id, warehouse_id, quantity_on_hand)
- stock_movements(movement_id INTEGER PRIMARY KEY, product_id, warehouse_id, movement_date, quantity, movement_type)

## Business logic
- Low stock: quantity_on_hand < reorder_point, summed over warehouses.
- Ignore discontinued products: discontinued = 0.
- movement_type is one of: receipt, shipment, adjustment; shipments are negative quantities.
"""  # noqa: E501

SKILLS: list[Skill] = [
    {
        "name": "sales_analytics",
        "description": "Schema and business rules for sales analysis: customers, orders, "
        "order items, revenue.",
        "content": SALES_CONTENT,
    },
    {
        "name": "inventory_management",
        "description": "Schema and business rules for inventory: products, warehouses, "
        "stock levels and movements.",
        "content": INVENTORY_CONTENT,
    },
]

SYSTEM_PROMPT = (
    "You are a SQL query assistant that helps users write queries against business "
    "databases. Run queries with run_sql_query and show the user the SQL and the rows."
)

QUESTION = "Write a SQL query to find all customers who made orders over $1000 in the last month"
DELETE_REQUEST = "Now delete the cancelled orders."

# --------------------------------------------------------------------------- the guard

ALLOWED_TABLES = {"customers", "orders", "order_items"}
_WRITE = re.compile(r"\b(insert|update|delete|drop|alter|truncate)\b", re.IGNORECASE)
_TABLE = re.compile(r"\b(?:from|join)\s+([A-Za-z_]\w*)", re.IGNORECASE)


def guard(query: str) -> str | None:
    """The tutorial's read-only guard: an error for the model, or `None` if the query may run."""
    if _WRITE.search(query):
        return "Error: only read-only queries (SELECT) allowed"
    tables = {name.lower() for name in _TABLE.findall(query)}
    denied = sorted(tables - ALLOWED_TABLES)
    if denied:
        return f"Error: not allowed to access these tables: {denied}"
    return None


# --------------------------------------------------------------------------- the database


def create_database(path: Path, today: date | None = None) -> None:
    """Create the sales tables with sample rows dated relative to `today`."""
    today = today or date.today()

    def ago(days: int) -> str:
        return (today - timedelta(days=days)).isoformat()

    with closing(sqlite3.connect(path)) as db, db:
        db.executescript(
            """
            CREATE TABLE customers(customer_id INTEGER PRIMARY KEY, name TEXT, email TEXT,
                signup_date TEXT, status TEXT, customer_tier TEXT);
            CREATE TABLE orders(order_id INTEGER PRIMARY KEY, customer_id INTEGER,
                order_date TEXT, status TEXT, total_amount REAL, sales_region TEXT);
            CREATE TABLE order_items(item_id INTEGER PRIMARY KEY, order_id INTEGER,
                product_id INTEGER, quantity INTEGER, unit_price REAL, discount_percent REAL);
            """
        )
        db.executemany(
            "INSERT INTO customers VALUES (?, ?, ?, ?, ?, ?)",
            [
                (1, "Ada Lovelace", "ada@example.com", ago(400), "active", "gold"),
                (2, "Alan Turing", "alan@example.com", ago(300), "active", "silver"),
                (3, "Grace Hopper", "grace@example.com", ago(200), "active", "gold"),
                (4, "Edsger Dijkstra", "edsger@example.com", ago(20), "active", "bronze"),
                (5, "Barbara Liskov", "barbara@example.com", ago(500), "inactive", "silver"),
            ],
        )
        db.executemany(
            "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)",
            [
                (101, 1, ago(5), "completed", 1500.0, "EMEA"),  # counts
                (102, 2, ago(10), "cancelled", 2500.0, "EMEA"),  # cancelled: no
                (103, 3, ago(12), "completed", 1200.0, "AMER"),  # counts
                (104, 3, ago(90), "completed", 3000.0, "AMER"),  # too old
                (105, 4, ago(3), "completed", 800.0, "APAC"),  # not high value
                (106, 5, ago(8), "refunded", 1100.0, "AMER"),  # refunded: no
                (107, 1, ago(2), "pending", 1300.0, "EMEA"),  # pending: no
            ],
        )
        db.executemany(
            "INSERT INTO order_items VALUES (?, ?, ?, ?, ?, ?)",
            [(1, 101, 7, 3, 500.0, 0.0), (2, 103, 8, 2, 600.0, 0.0), (3, 105, 7, 1, 800.0, 0.0)],
        )


def sql_tools(db_path: Path) -> list[BaseTool]:
    """`run_sql_query` over the database at `db_path`."""

    @tool
    def run_sql_query(query: str, vertical: str, runtime: ToolRuntime) -> str:
        """Run a read-only SQL query and return its rows as JSON.

        `vertical` is the skill whose schema the query uses (e.g. sales_analytics); load it
        with load_skill first.
        """
        if error := require_skill(runtime.state, vertical):
            return error
        if error := guard(query):
            return error
        # Read-only at the database level too, in case the guard's regexes miss something.
        with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
            db.row_factory = sqlite3.Row
            try:
                rows = [dict(row) for row in db.execute(query).fetchall()]
            except sqlite3.Error as error:
                return f"Error: the database rejected the query: {error}"
        return f"{len(rows)} rows: {json.dumps(rows)}"

    return [run_sql_query]


def build_agent(
    model: BaseChatModel, db_path: Path, *, checkpointer: Checkpointer = None
) -> Any:
    """The SQL assistant: the skills middleware plus `run_sql_query`."""
    return create_agent(
        model,
        tools=sql_tools(db_path),
        system_prompt=SYSTEM_PROMPT,
        middleware=[SkillMiddleware(SKILLS)],
        checkpointer=checkpointer,
        name="sql_assistant",
    )


# --------------------------------------------------------------------------- offline model


def _loaded_skill(request: ScriptRequest, name: str) -> str | None:
    """The content of skill `name` if a load_skill result for it is in the conversation."""
    header = f"Loaded skill: {name}\n\n"
    for message in request.messages:
        if isinstance(message, ToolMessage) and message.text.startswith(header):
            return message.text[len(header):]
    return None


def _sql_from_rules(rules: str) -> str | None:
    """SQL for the question, with every condition taken from the skill's text."""
    threshold = re.search(r"High-value order: (total_amount > \d+)", rules)
    revenue = re.search(r"Revenue:.*?(status = '\w+')", rules)
    last_month = re.search(r"\"last month\" use: (order_date >= date\([^)]*\))", rules)
    if not (threshold and revenue and last_month):
        return None
    return (
        "SELECT DISTINCT c.customer_id, c.name, c.email, c.customer_tier\n"
        "FROM customers c JOIN orders o ON c.customer_id = o.customer_id\n"
        f"WHERE o.{threshold.group(1)}\n"
        f"  AND o.{revenue.group(1)}\n"
        f"  AND o.{last_month.group(1)}\n"
        "ORDER BY c.customer_id"
    )


def sql_policy(request: ScriptRequest) -> AIMessage | str:
    """Load the skill the question needs, then query by its rules; answer from the rows."""
    question = request.last_human_text
    lowered = question.lower()
    skill = "inventory_management" if re.search(r"stock|warehouse|inventory", lowered) else (
        "sales_analytics")
    results = request.turn_results
    last = results[-1] if results else None

    if last is not None and last.name == "run_sql_query":
        query = next(
            tc["args"]["query"]
            for m in reversed(request.messages) if isinstance(m, AIMessage)
            for tc in m.tool_calls if tc["id"] == last.tool_call_id
        )
        if last.text.startswith("Error"):
            return f"I did not run that. {last.text}"
        return f"```sql\n{query}\n```\n\nResult: {last.text}"

    rules = _loaded_skill(request, skill)
    if rules is None:
        if last is not None and last.name == "load_skill":
            return f"I could not load the {skill} skill: {last.text}"
        return ai("", tool_call("load_skill", {"skill_name": skill}))

    if "delete" in lowered:
        query = "DELETE FROM orders WHERE status = 'cancelled'"
    else:
        sql = _sql_from_rules(rules)
        if sql is None:
            return f"The {skill} skill does not say how to answer this."
        query = sql
    if not request.has_tool("run_sql_query"):
        return f"```sql\n{query}\n```"
    return ai("", tool_call("run_sql_query", {"query": query, "vertical": skill}))


# --------------------------------------------------------------------------- the run


def _show(messages: list[Any]) -> None:
    for message in messages:
        if isinstance(message, AIMessage) and message.tool_calls:
            for call in message.tool_calls:
                print(f"  AI -> {call['name']}({call['args']})")
        elif isinstance(message, ToolMessage):
            first_line = message.text.splitlines()[0] if message.text else ""
            print(f"  Tool[{message.name}]: {first_line}")
        elif isinstance(message, AIMessage):
            print(f"  AI: {message.text}")
        else:
            print(f"  Human: {message.text}")


def main(model: BaseChatModel | None = None) -> dict[str, Any]:
    """Ask the tutorial's question, then ask for a delete; return what happened."""
    model = model or ScriptedModel(policy=sql_policy)
    with tempfile.TemporaryDirectory() as folder:
        db_path = Path(folder) / "shop.db"
        create_database(db_path)
        agent = build_agent(model, db_path, checkpointer=InMemorySaver())
        usage = AgentUsage()
        config = {"configurable": {"thread_id": "sql-1"}, "callbacks": [usage]}

        print(f"== Turn 1: {QUESTION}")
        first = agent.invoke({"messages": [HumanMessage(QUESTION)]}, config)
        _show(first["messages"])
        turn1_calls = usage.total().calls
        rows: list[dict[str, Any]] = []
        for message in first["messages"]:
            if isinstance(message, ToolMessage) and message.name == "run_sql_query":
                if message.text.startswith("Error"):
                    print(f"query refused: {message.text}")
                else:
                    rows = json.loads(message.text.split(": ", 1)[1])
        print("rows returned:")
        for row in rows:
            print(f"  {row}")

        print(f"\n== Turn 2: {DELETE_REQUEST}")
        second = agent.invoke({"messages": [HumanMessage(DELETE_REQUEST)]}, config)
        new_messages = second["messages"][len(first["messages"]):]
        _show(new_messages)
        with closing(sqlite3.connect(db_path)) as db:
            cancelled = db.execute(
                "SELECT COUNT(*) FROM orders WHERE status = 'cancelled'"
            ).fetchone()[0]
        print(f"cancelled orders still in the database: {cancelled}")
        print(f"skills loaded: {second.get('skills_loaded', [])}")
        print(f"model calls: turn 1 = {turn1_calls}, turn 2 = {usage.total().calls - turn1_calls}")

        tool_calls = [
            tc["name"] for m in second["messages"] if isinstance(m, AIMessage)
            for tc in m.tool_calls
        ]
        queries = [
            tc["args"].get("query", "") for m in second["messages"] if isinstance(m, AIMessage)
            for tc in m.tool_calls if tc["name"] == "run_sql_query"
        ]
        refusals = [
            m.text for m in new_messages
            if isinstance(m, ToolMessage) and m.text.startswith("Error")
        ]
        return {
            "rows": rows,
            "queries": queries,
            "tool_calls": tool_calls,
            "skills_loaded": second.get("skills_loaded", []),
            "guard_errors": refusals,
            "cancelled_orders_left": cancelled,
            "turn1_calls": turn1_calls,
            "turn2_calls": usage.total().calls - turn1_calls,
            "answers": [first["messages"][-1].text, second["messages"][-1].text],
        }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", help="a real model as provider:model (default: the offline scripted model)"
    )
    args = parser.parse_args()
    main(init_chat_model(args.model) if args.model else None)
