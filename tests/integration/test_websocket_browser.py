"""A real browser speaking NATS over WebSocket: Debian's headless Chromium (as in the dashboard
test) loads a page from an origin the server allows, opens a WebSocket to jetpy, sends CONNECT,
SUB and PUB with a user's credentials and reads its MSG back (compression on, as browsers offer
it); a page from another origin is refused at the upgrade."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from test_dashboard_browser import browser, until

import jetpy
from jetpy.server.options import ServerOptions, User, WebSocketOptions

PAGE = """<!doctype html><html><head><title>start</title></head><body><pre id="out"></pre><script>
const out = document.getElementById("out");
const ws = new WebSocket("ws://127.0.0.1:%(port)d/");
ws.binaryType = "arraybuffer";
const text = (d) => typeof d === "string" ? d : new TextDecoder().decode(d);
let sent = false;
ws.onmessage = (ev) => {
  out.textContent += text(ev.data);
  if (!sent) {
    sent = true;
    ws.send(new TextEncoder().encode('CONNECT {"verbose":false,"user":"web","pass":"pw"}\\r\\n' +
      'SUB browser.test 1\\r\\nPUB browser.test 14\\r\\nfrom a browser\\r\\nPING\\r\\n'));
  }
  if (out.textContent.includes("PONG")) document.title = "done";
};
ws.onerror = () => { document.title = "error"; };
ws.onclose = () => { if (document.title !== "done") document.title = "closed"; };
</script></body></html>"""


@asynccontextmanager
async def page_server(page: dict[str, str]) -> AsyncIterator[int]:
    """A one-page HTTP server on loopback (the page's origin); serves ``page["html"]``."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        body = page["html"].encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
            % len(body)
            + body
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield int(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()


async def test_browser_speaks_nats_over_websocket(tmp_path: Path) -> None:
    page = {"html": ""}
    async with page_server(page) as page_port:
        origin = f"http://127.0.0.1:{page_port}"
        opts = ServerOptions(
            host="127.0.0.1",
            port=0,
            users=[User(user="web", password="pw", permissions={"subscribe": {"allow": ["browser.>"]}})],
            websocket=WebSocketOptions(
                port=-1, host="127.0.0.1", no_tls=True, compression=True, allowed_origins=(origin,)
            ),
        )
        async with jetpy.Server(opts) as srv:
            page["html"] = PAGE % {"port": srv.ws_port}
            driver = await asyncio.to_thread(browser, tmp_path / "profile")
            try:
                await asyncio.to_thread(driver.get, f"{origin}/")
                await until(
                    driver, "the page's NATS exchange", lambda d: d.title in ("done", "error", "closed")
                )
                text = await asyncio.to_thread(lambda: driver.find_element("id", "out").text)
                assert driver.title == "done", text
                assert "INFO {" in text and "MSG browser.test 1 14" in text and "from a browser" in text
                conn = next(c for c in srv.connections.values() if c.client_type == "websocket")
                assert conn.user == "web"
                # a page from another origin is refused at the upgrade
                await asyncio.to_thread(driver.get, "data:text/html," + page["html"].replace("#", "%23"))
                await until(driver, "the refusal", lambda d: d.title in ("done", "error", "closed"))
                assert driver.title in ("error", "closed")
            finally:
                await asyncio.to_thread(driver.quit)
