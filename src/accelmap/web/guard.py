"""The web app's guards as ASGI middleware: a local app is reachable from any page the user's
browser opens, so

- ``Guard`` refuses a ``Host`` that is not a loopback name or the bound host (DNS rebinding:
  a hostile name resolved to 127.0.0.1 carries its own name in Host), and a cross-site write:
  an ``Origin`` other than this app's, or ``Sec-Fetch-Site: cross-site`` (a form or multipart
  post from another page needs no CORS preflight, so the server must refuse it itself);
- ``Headers`` adds a Content-Security-Policy (scripts and connections to this origin only,
  never framed), X-Frame-Options, X-Content-Type-Options: nosniff and Referrer-Policy to every
  answer (OWASP Secure Headers Project's recommended set).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi.responses import JSONResponse

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
SAFE = frozenset({"GET", "HEAD", "OPTIONS"})

CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
       "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
# Swagger UI's page starts itself with one inline script (fastapi.openapi.docs)
DOCS_CSP = CSP.replace("script-src 'self'", "script-src 'self' 'unsafe-inline'")
HEADERS = [(b"x-frame-options", b"DENY"), (b"x-content-type-options", b"nosniff"),
           (b"referrer-policy", b"no-referrer"), (b"cross-origin-opener-policy", b"same-origin"),
           (b"cross-origin-resource-policy", b"same-origin")]


def host_name(host: str) -> str:
    """The name of a Host header value, without its port ('[::1]:8000' -> '::1')."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Guard:
    """Refuse (403, in the app's error shape) a request to a host name not in ``hosts``
    (loopback and the bound host) or a cross-site write."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str]) -> None:
        self.app, self.hosts = app, frozenset(h.lower() for h in hosts) | LOOPBACK

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        why = self.refusal(scope)
        if why:
            await JSONResponse({"error": why}, status_code=403)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> str | None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers") or []}
        host = headers.get("host", "")
        if host_name(host) not in self.hosts:
            return (f"host {host[:80]!r} is not this app's: it answers on its bound address "
                    "and loopback names only (127.0.0.1, localhost)")
        if scope.get("method", "GET") in SAFE:
            return None
        origin = headers.get("origin")
        if origin is not None and origin.lower().split("://", 1)[-1] != host.lower():
            return (f"cross-site request refused (Origin {origin[:80]!r}): use the page this "
                    "app serves, or a client that sends no Origin (curl, the CLI)")
        if headers.get("sec-fetch-site", "same-origin") == "cross-site":
            return "cross-site request refused: use the page this app serves"
        return None


class Headers:
    """Add the security headers to every answer (``DOCS_CSP`` on /docs)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = DOCS_CSP if scope.get("path") == "/docs" else CSP

        async def with_headers(msg: Message) -> None:
            if msg["type"] == "http.response.start":
                have = {k.lower() for k, _ in msg.get("headers", [])}
                extra = [(k, v) for k, v in [(b"content-security-policy", csp.encode()),
                                             *HEADERS] if k not in have]
                msg = {**msg, "headers": [*msg.get("headers", []), *extra]}
            await send(msg)

        await self.app(scope, receive, with_headers)
