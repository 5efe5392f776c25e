"""The web page in a real browser (headless Chromium) against a live `fathom serve`.

Each test acts as a person would (click, type, press Enter) and asserts on what the page
shows. Nothing sleeps: Playwright's expectations poll the DOM, with timeouts that only bound
a hang.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

pytest.importorskip("playwright.sync_api")
from playwright.sync_api import expect
from tests.server.web.conftest import WebServer
from tests.server.web.support import new_thread, open_page, screenshot, send, wait_idle

STREAM_RECORDER = """
window.__streamed = [];
new MutationObserver((records) => {
  for (const record of records) for (const node of record.addedNodes) {
    const owner = node.nodeType === 3 ? node.parentElement : node;
    if (owner && owner.closest && owner.closest('[data-stream]'))
      window.__streamed.push(node.textContent.length);
  }
}).observe(document.getElementById('messages'), {childList: true, subtree: true});
"""
"""Records the length of each text the streaming bubble showed (each token sets a new text)."""


def test_a_message_streams_text_and_shows_todos_and_a_file(page: Any, web_server: WebServer):
    open_page(page, web_server.url)
    new_thread(page)
    page.evaluate(STREAM_RECORDER)
    send(page, "plan")
    answer = page.locator(".msg.ai .markdown").last
    expect(answer).to_contain_text("The plan is ready and written to /notes.md.")
    wait_idle(page)
    streamed = page.evaluate("window.__streamed")
    assert len(set(streamed)) > 3, f"the answer did not arrive token by token: {streamed}"
    expect(answer.locator("h2")).to_have_text("Notes")  # markdown rendered by the server
    expect(answer.locator("pre.hl .k").first).to_have_text("def")  # code highlighted
    todos = page.locator("#todos li")
    expect(todos).to_have_count(3)
    expect(page.locator("#todos li.in_progress")).to_contain_text("Write the notes")
    expect(page.locator("#todos li.completed")).to_contain_text("Read the brief")
    page.locator("#files button[data-path='/notes.md']").click()
    expect(page.locator("#file-view .code")).to_contain_text("The plan, written down.")
    page.locator("#file-view details.change summary").first.click()
    expect(page.locator("#file-view .diff")).to_contain_text("+The plan, written down.")
    call = page.locator("details.tool[data-call]", has_text="write_file")
    call.locator("summary").click()  # the tool call opens to its arguments and result
    expect(call.locator("pre.json")).to_contain_text('"file_path": "/notes.md"')
    expect(call.locator("pre.result")).to_contain_text("/notes.md")
    expect(page.locator("#usage tr[data-agent='agent'] td").first).to_have_text("2")
    screenshot(page, "conversation")


def test_approvals_approve_one_reject_one_with_a_reason_and_edit_another(
    page: Any, web_server: WebServer
):
    open_page(page, web_server.url)
    new_thread(page, "careful")
    send(page, "three files")
    cards = page.locator("#approvals .approval")
    expect(cards).to_have_count(3)
    expect(page.locator("#approvals")).to_contain_text("alpha.txt")
    # the first stays approved; the second is rejected with a reason; the third is edited
    cards.nth(1).locator("label.choice.reject input").check()
    cards.nth(1).locator("input.reason").fill("not beta, please")
    edited = {"file_path": "/gamma.txt", "content": "gamma, edited by a person\n"}
    cards.nth(2).locator("textarea.args").fill(json.dumps(edited))
    expect(cards.nth(2).locator("label.choice.edit input")).to_be_checked()
    page.evaluate("document.getElementById('approvals').scrollTop = 0")
    screenshot(page, "approvals")
    page.get_by_role("button", name="Submit decisions").click()
    expect(page.locator(".msg.ai .markdown").last).to_contain_text("Writes done:")
    wait_idle(page)
    expect(page.locator("#approvals")).to_be_hidden()
    expect(page.locator("#files button[data-path]")).to_have_text(["alpha.txt", "gamma.txt"])
    beta = page.locator("details.tool", has_text="/beta.txt")
    beta.locator("summary").click()
    expect(beta.locator("pre.result")).to_contain_text("not beta, please")
    page.locator("#files button[data-path='/gamma.txt']").click()
    expect(page.locator("#file-view .code")).to_contain_text("gamma, edited by a person")


def test_two_parallel_subagents_and_an_async_task_finish(page: Any, web_server: WebServer):
    open_page(page, web_server.url)
    new_thread(page)
    send(page, "delegate")
    sync = page.locator("#agents li[data-kind='sync']")
    expect(sync).to_have_count(2)
    expect(sync.locator(".status")).to_have_text(["done", "done"])
    expect(sync.nth(0)).to_contain_text("Find the alpha fact")
    expect(sync.nth(1)).to_contain_text("Find the beta fact")
    task = page.locator("#agents li[data-kind='async']")
    expect(task).to_have_count(1)
    expect(task).to_contain_text("worker")
    expect(task.locator(".status")).to_have_text("success")
    expect(page.locator(".note")).to_contain_text("Background task worker success")
    expect(page.locator(".msg.ai .markdown", has_text="Both helpers answered")).to_contain_text(
        "helper found: Find the alpha fact / helper found: Find the beta fact")
    call = page.locator("details.tool", has_text="Find the alpha fact")
    call.locator("summary").click()
    expect(call.locator("pre.subtext")).to_contain_text("helper found: Find the alpha fact")
    expect(page.locator("#usage tr[data-agent='helper'] td").first).to_have_text("2")
    expect(page.locator("#usage tr[data-agent='worker (async)'] td").first).to_have_text("1")
    expect(page.locator("#usage tr[data-agent='worker']")).to_have_count(0)  # not counted twice
    screenshot(page, "subagents")


def test_the_dynamic_subagents_of_an_eval_show_with_their_outcome(page: Any, web_server: WebServer):
    open_page(page, web_server.url)
    new_thread(page)
    send(page, "fan out")
    expect(page.locator(".msg.ai .markdown").last).to_contain_text("The judges are done.")
    dynamic = page.locator("#agents li[data-kind='dynamic']")
    expect(dynamic).to_have_count(2)
    expect(dynamic.locator(".name")).to_have_text(["judge 1 (helper)", "judge 2 (helper)"])
    expect(dynamic.locator(".status")).to_have_text(["done", "error"])
    expect(dynamic.nth(1)).to_contain_text("judge 2 gave up")


def test_a_reload_mid_run_rejoins_the_stream(page: Any, web_server: WebServer):
    web_server.reset_gate()
    open_page(page, web_server.url)
    new_thread(page)
    send(page, "slow")
    web_server.wait_until_held()
    expect(page.locator("body[data-run='running']")).to_be_attached()
    page.reload()
    expect(page.locator("body[data-ready='1']")).to_be_attached()
    expect(page.locator("body[data-run='running']")).to_be_attached()  # rejoined, not idle
    expect(page.get_by_role("button", name="Cancel run")).to_be_visible()
    expect(page.locator("details.tool", has_text="wait_gate").locator(".tool-status")).to_have_text(
        "running")
    screenshot(page, "rejoined")
    web_server.open_gate()
    expect(page.locator(".msg.ai .markdown").last).to_contain_text("Gate released")
    wait_idle(page)


def test_a_lost_connection_rejoins_where_it_left_off(page: Any, web_server: WebServer):
    web_server.reset_gate()
    open_page(page, web_server.url)
    new_thread(page)
    send(page, "slow")
    web_server.wait_until_held()
    # The page has an event id to rejoin from only once it has shown an event of the run.
    expect(page.locator(".msg.ai", has_text="Starting the slow step.")).to_have_count(1)
    rejoins: list[dict[str, str]] = []
    page.on("request", lambda r: r.url.endswith("/stream") and r.method == "GET"
            and rejoins.append(r.headers))  # fmt: skip
    page.context.set_offline(True)
    expect(page.locator("#conn")).to_contain_text("connection lost")
    page.context.set_offline(False)
    web_server.open_gate()
    expect(page.locator(".msg.ai .markdown").last).to_contain_text("Gate released")
    wait_idle(page)
    expect(page.locator(".msg.ai", has_text="Starting the slow step.")).to_have_count(1)
    assert rejoins and rejoins[-1].get("last-event-id", "").isdigit(), rejoins  # not from the start


def test_a_cancelled_run_is_shown_plainly(page: Any, web_server: WebServer):
    web_server.reset_gate()
    open_page(page, web_server.url)
    new_thread(page)
    send(page, "slow")
    web_server.wait_until_held()
    page.get_by_role("button", name="Cancel run").click()
    expect(page.locator("#banner")).to_have_text("Run cancelled.")
    wait_idle(page, "interrupted")
    web_server.open_gate()


def test_an_error_shows(page: Any, web_server: WebServer):
    open_page(page, web_server.url)
    new_thread(page)
    send(page, "fail")
    expect(page.locator("#banner.error")).to_contain_text("the model service is unavailable")
    wait_idle(page, "error")
    screenshot(page, "error")
    page.reload()  # a thread whose last run failed says so when opened again
    expect(page.locator("#banner.error")).to_contain_text("The last run of this thread failed")


def test_two_tabs_on_one_thread_stay_consistent(page: Any, web_server: WebServer):
    open_page(page, web_server.url)
    thread = new_thread(page)
    other = page.context.new_page()
    open_page(other, web_server.url)
    other.locator(f"#thread-list button[data-thread='{thread}']").click()  # listed in both
    send(page, "hello from the first tab")
    for tab in (page, other):
        expect(tab.locator(".msg.ai .markdown").last).to_contain_text(
            "You said hello from the first tab")
    send(other, "and from the second")
    expect(page.locator(".msg.ai .markdown").last).to_contain_text("You said and from the second")
    fresh = new_thread(other)  # a thread started in one tab appears in the other's list
    expect(page.locator(f"#thread-list button[data-thread='{fresh}']")).to_be_visible()
    other.close()


def test_html_in_a_message_is_shown_as_text_and_never_run(page: Any, web_server: WebServer):
    open_page(page, web_server.url)
    new_thread(page)
    attack = '<img src=x onerror="window.__xss=1"> [link](javascript:window.__xss=2)'
    send(page, attack)
    answer = page.locator(".msg.ai .markdown").last
    expect(answer).to_contain_text('<img src=x onerror="window.__xss=1">')
    wait_idle(page)
    assert page.evaluate("window.__xss") is None
    assert answer.locator("img").count() == 0
    assert answer.locator("a[href^='javascript']").count() == 0


def test_the_page_is_keyboard_usable_and_readable_when_narrow(browser: Any, web_server: WebServer):
    context = browser.new_context(viewport={"width": 420, "height": 900}, color_scheme="light")
    page = context.new_page()
    open_page(page, web_server.url)
    page.keyboard.press("Tab")  # the first stop is a skip link straight to the message box
    assert page.evaluate("document.activeElement.id") == "skip"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "input"
    page.select_option("#assistant", "agent")
    page.locator("#assistant").focus()
    focused = []
    for _ in range(400):  # Tab goes through the threads list and reaches the message box
        page.keyboard.press("Tab")
        focused.append(page.evaluate("document.activeElement.id || document.activeElement.tagName"))
        if focused[-1] == "input":
            break
    assert focused[-1] == "input", f"Tab never reached the message box: {focused}"
    assert focused.index("new-thread") < focused.index("thread-search") < focused.index("input")
    page.keyboard.type("plan")
    page.keyboard.press("Enter")
    expect(page.locator(".msg.ai .markdown").last).to_contain_text("The plan is ready")
    wait_idle(page)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 420, f"the page scrolls sideways at 420px: {width}px wide"
    page.evaluate("document.querySelector('nav.threads').scrollTop = 0")
    screenshot(page, "narrow")
    context.close()


def test_with_an_api_key_the_page_asks_for_it_and_sends_it(page: Any, keyed_server: WebServer):
    assert httpx.get(f"{keyed_server.url}/threads/search").status_code in (401, 405)
    page.goto(keyed_server.url + "/")
    dialog = page.locator("#key-dialog")
    expect(dialog).to_be_visible()
    page.fill("#key-input", "wrong")
    page.keyboard.press("Enter")
    expect(page.locator("#key-error")).to_contain_text("refused")
    page.fill("#key-input", "s3cret-key")
    page.keyboard.press("Enter")
    expect(page.locator("body[data-ready='1']")).to_be_attached()
    assert page.evaluate("sessionStorage.getItem('fathom.apiKey')") == "s3cret-key"
    new_thread(page)
    send(page, "hello")
    expect(page.locator(".msg.ai .markdown").last).to_contain_text("You said hello")
