"""The dashboard in a real browser: Debian's headless Chromium driven by Selenium through the
system chromedriver (``make test`` installs both with apt, as it installs the reference server).

One server, real nats-py clients, one page load: the page shows a stream the test created, its
message count follows publishing, KV buckets, object stores, consumers and connections appear,
every name the server reports (a stream and a client named with markup in them) stays text,
and the browser logs no console error. A screenshot is kept under the test's temp dir.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
import pytest

from jetpy.server.app import Server

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
# flags for a headless Chromium on a machine with no network but loopback (no background
# fetches, no first-run UI, a fresh profile per test)
CHROME_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,2000",
)
XSS_STREAM = "XSS<script"  # stream names may not hold ">" (nor ".", "*", "/", spaces)
XSS_CLIENT = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
WAIT = 20.0


def browser(profile: Path) -> Any:
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip(
            "Debian's chromium and chromium-driver are not installed (make test installs them as root)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium look for a driver online
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in CHROME_FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={profile}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)


async def until(driver: Any, what: str, check: Callable[[Any], Any]) -> Any:
    """Poll ``check(driver)`` in a worker thread (the server runs on this loop) until truthy."""
    deadline = time.monotonic() + WAIT
    while True:
        value = await asyncio.to_thread(check, driver)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"dashboard: {what} not seen in {WAIT:.0f}s")
        await asyncio.sleep(0.1)


def row_of(driver: Any, table: str, name: str) -> list[str] | None:
    """The cells' text of the row of ``table`` that has a cell reading ``name`` (read in one
    script call: the page redraws its tables every refresh)."""
    rows: list[list[str]] = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])]"
        ".map(tr => [...tr.cells].map(td => td.textContent.trim()))",
        f"#{table} tbody tr",
    )
    return next((cells for cells in rows if name in cells), None)


async def test_dashboard_in_a_real_browser(tmp_path: Path) -> None:
    async with Server(port=0, http_port=-1, store_dir=str(tmp_path / "js"), server_name="dash1") as srv:
        nc = await nats.connect(srv.client_url, name=XSS_CLIENT)
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"], max_msgs=100)
        await js.add_stream(name=XSS_STREAM, subjects=["xss.<script>"])
        await js.add_consumer("ORDERS", durable_name="SHIPPING", ack_policy="explicit")
        kv = await js.create_key_value(bucket="settings")
        await kv.put("color", b"blue")
        obj = await js.create_object_store(bucket="files")
        await obj.put("report.txt", b"x" * 1000)

        driver = await asyncio.to_thread(browser, tmp_path / "profile")
        started = time.monotonic()
        try:
            await asyncio.to_thread(driver.get, srv.monitor_url + "/dashboard?refresh=500")
            cells = await until(driver, "stream ORDERS", lambda d: row_of(d, "streams", "ORDERS"))
            assert cells[0] == "$G" and cells[4] == "0"  # the account, messages
            for i in range(7):
                await js.publish("orders.new", f"order {i}".encode())
            cells = await until(
                driver,
                "7 messages in ORDERS",
                lambda d: (r := row_of(d, "streams", "ORDERS")) and r[4] == "7" and r,
            )
            assert cells[2] == "orders.>" and "msgs 100" in cells[6] and cells[7].endswith("7%")
            consumer = await until(driver, "consumer SHIPPING", lambda d: row_of(d, "consumers", "SHIPPING"))
            assert consumer[:2] == ["$G", "ORDERS"] and consumer[5] == "7"  # pending
            assert await until(driver, "KV bucket", lambda d: row_of(d, "kv", "settings"))
            assert await until(driver, "object store", lambda d: row_of(d, "objects", "files"))
            # names with markup in them are shown as text and never run
            xss_row = await until(driver, "the <script> stream", lambda d: row_of(d, "streams", XSS_STREAM))
            assert xss_row[2] == "xss.<script>"
            conn = await until(driver, "the <img> client", lambda d: row_of(d, "connections", XSS_CLIENT))
            assert conn[1:3] == ["$G", XSS_CLIENT]
            injected = await asyncio.to_thread(
                driver.execute_script,
                "return [window.__xss, document.querySelectorAll('main img, main script').length,"
                " document.scripts.length, document.getElementById('health').textContent]",
            )
            assert injected == [None, 0, 1, "healthy"]
            await asyncio.sleep(1.2)  # let the rate charts draw a few points
            shot = tmp_path / "dashboard.png"
            await asyncio.to_thread(driver.save_screenshot, str(shot))
            assert shot.stat().st_size > 10_000
            logs = await asyncio.to_thread(driver.get_log, "browser")
            errors = [e for e in logs if e.get("level") == "SEVERE"]
            assert errors == [], errors
            print(f"dashboard browser test: {time.monotonic() - started:.1f}s, screenshot {shot}")
        finally:
            await asyncio.to_thread(driver.quit)
            await nc.close()
