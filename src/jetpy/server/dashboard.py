"""Dashboard: the live web page the monitoring port serves at ``/dashboard``.

Owns the page's routes and how its files are served: ``index.html``, ``dashboard.js`` and
``dashboard.css``, shipped inside the package (``dashboard_assets/``) and read once, so the page
needs nothing from the internet. The page itself reads only the monitoring endpoints (/varz,
/jsz, /connz, /routez, /gatewayz, /healthz) and redraws every two seconds; it puts every server-supplied
name into the page as text, and the Content-Security-Policy sent with it allows no inline script, no
script from elsewhere and no connection but to this port, so a name holding markup stays text
even if a bug slipped through. Knows nothing of the server: what the page shows is what the
endpoints answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Final

from jetpy.server.monitor_endpoints import HTML, Reply
from jetpy.server.monitor_format import Query

__all__ = ["CSP", "routes"]

CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"
)
_FILES: Final = {
    "/dashboard": ("index.html", HTML),
    "/dashboard/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    "/dashboard/dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
}


def _asset(name: str) -> bytes:
    return resources.files("jetpy.server").joinpath("dashboard_assets", name).read_bytes()


def routes() -> dict[str, Callable[[Query], Awaitable[Reply]]]:
    """Each path of the page and its handler (the files are read now, once)."""
    out: dict[str, Callable[[Query], Awaitable[Reply]]] = {}
    for path, (name, content_type) in _FILES.items():
        reply = Reply(
            200, _asset(name), content_type, (("Content-Security-Policy", CSP), ("Cache-Control", "no-cache"))
        )

        async def serve(q: Query, reply: Reply = reply) -> Reply:
            return reply

        out[path] = serve
    return out
