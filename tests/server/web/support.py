"""Steps the browser tests share: open the page, start a thread, send a message, screenshot."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect
from tests.server.web.conftest import IMAGES

HANG_MS = 30_000
"""Bounds a hang in one expectation; nothing waits for it to pass."""

expect.set_options(timeout=HANG_MS)


def open_page(page: Any, url: str, fragment: str = "") -> None:
    """Load the page and wait until it has loaded the agents and threads."""
    page.goto(f"{url}/{fragment}")
    expect(page.locator("body[data-ready='1']")).to_be_attached()


def new_thread(page: Any, assistant: str = "agent") -> str:
    """Pick `assistant`, start a new thread, and return its id."""
    page.select_option("#assistant", assistant)
    page.click("#new-thread")
    expect(page.locator("#thread-title")).to_contain_text(assistant)
    return page.evaluate("location.hash").split("thread=")[1]


def send(page: Any, text: str) -> None:
    """Type `text` and press Enter."""
    page.fill("#input", text)
    page.press("#input", "Enter")


def wait_idle(page: Any, status: str = "success") -> None:
    """Wait until the page says the last run ended with `status`."""
    expect(page.locator(f"body[data-run='{status}']")).to_be_attached()


def screenshot(page: Any, name: str) -> None:
    """Save a screenshot as `IMAGES/web-<name>.png` (the page as a person sees it)."""
    IMAGES.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(IMAGES / f"web-{name}.png"), full_page=False)
