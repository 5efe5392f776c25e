"""`fathom serve --open` opens the page in the browser once the server listens."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from tests.server.web.conftest import prepare

DEADLINE_S = 60.0
"""Bounds a hang while waiting for the browser command to run."""


def test_serve_open_opens_the_page_at_the_servers_url(tmp_path: Path):
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {opened}\n')
    browser.chmod(0o755)
    server = prepare(tmp_path)
    server.start("--open", env={"BROWSER": str(browser)})
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not opened.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert opened.exists(), server.log()
        assert opened.read_text() == f"{server.url}/"
        assert "<title>fathom</title>" in httpx.get(opened.read_text()).text
    finally:
        server.stop()
