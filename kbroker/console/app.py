"""The console's aiohttp application: routes, templates, and the middlewares every request
goes through.

- Basic authentication when users are configured (401 with a challenge otherwise).
- A session cookie (``SameSite=Strict``, ``HttpOnly``) whose CSRF token every form carries;
  a POST without the matching token, or from another origin, is refused with 403.
- Every answer carries a Content-Security-Policy that allows scripts, styles and images from
  the console itself only (no inline script: record contents can never run), and the usual
  nosniff, frame and referrer headers.
- Cluster errors become an error page naming the cause (502), bad input a 400.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import web

from kbroker.cli.ops.admin import OpsError
from kbroker.console import actions, pages
from kbroker.console.auth import CsrfTokens, basic_user
from kbroker.console.context import CONSOLE, PACKAGE_DIR, Console, console_of, render
from wire.errors import ErrorCode, KafkaError

SESSION_COOKIE = "kbroker_console_session"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
SAMPLER_TASK = web.AppKey("sampler_task", asyncio.Task[None])


def _same_origin(request: web.Request) -> bool:
    """A POST's Origin (or Referer) must be this console: browsers send it on form posts."""
    source = request.headers.get("Origin") or request.headers.get("Referer")
    if not source:
        return True
    parts = urlsplit(source)
    return parts.netloc == request.host and parts.scheme == request.scheme


@web.middleware
async def security_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    console = console_of(request)
    if console.users:
        user = basic_user(request.headers.get("Authorization"), console.users)
        if user is None:
            return web.Response(
                status=401,
                text="authentication required\n",
                headers={"WWW-Authenticate": 'Basic realm="kbroker console", charset="UTF-8"'},
            )
        request["user"] = user
    session = request.cookies.get(SESSION_COOKIE)
    new_session = not session or len(session) > 64
    if new_session:
        session = CsrfTokens.new_session()
    request["session"] = session
    if request.method not in ("GET", "HEAD"):
        if not console.allow_writes:
            return _error(
                request,
                403,
                "This console is read-only: start it with --allow-writes to change the cluster.",
            )
        form = await request.post()
        token = form.get("csrf_token")
        if new_session or not isinstance(token, str) or not console.tokens.valid(session, token):
            return _error(
                request,
                403,
                "The form is stale or did not come from this console "
                "(CSRF token missing or wrong): reload the page and try again.",
            )
        if not _same_origin(request):
            return _error(request, 403, "Cross-origin request refused.")
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        if exc.status >= 400 and exc.content_type != "text/html":
            response = _error(request, exc.status, exc.text or exc.reason)
        else:
            response = exc
    except (KafkaError, OpsError) as exc:
        response = _error(request, _status_of(exc), _message_of(exc))
    except (OSError, TimeoutError) as exc:
        response = _error(
            request, 502, f"Cannot reach the cluster at {console.bootstrap}: {exc or 'timeout'}"
        )
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    # same-origin, not no-referrer: with no-referrer browsers send "Origin: null" on form posts,
    # and the origin check above needs the real one.
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers.setdefault("Cache-Control", "no-store")
    if new_session and isinstance(response, web.Response | web.HTTPException):
        response.set_cookie(
            SESSION_COOKIE,
            session,
            httponly=True,
            samesite="Strict",
            secure=request.scheme == "https",
            path="/",
        )
    return response


def _status_of(exc: KafkaError | OpsError) -> int:
    code = exc.code
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.GROUP_ID_NOT_FOUND):
        return 404
    if code is not None and "AUTHORIZATION" in code.name:
        return 403
    if code is not None and code.name.startswith("INVALID"):
        return 400
    return 502 if isinstance(exc, KafkaError) else 400


def _message_of(exc: KafkaError | OpsError) -> str:
    if isinstance(exc, KafkaError):
        detail = f" ({exc.message})" if exc.message else ""
        return f"The cluster answered {ErrorCode(exc.code).name}{detail}."
    return str(exc)


def _error(request: web.Request, status: int, message: str) -> web.Response:
    return render(request, "error.html", status=status, message=message, status_code=status)


def build_app(console: Console) -> web.Application:
    app = web.Application(middlewares=[security_middleware], client_max_size=2 * 1024 * 1024)
    app[CONSOLE] = console
    pages.add_routes(app)
    actions.add_routes(app)
    app.router.add_static("/static/", PACKAGE_DIR / "static", name="static")
    if console.vendor_dir.is_dir():
        app.router.add_static("/vendor/", console.vendor_dir, name="vendor")
    app.on_startup.append(_start_sampler)
    app.on_cleanup.append(_stop)
    return app


async def _start_sampler(app: web.Application) -> None:
    console = app[CONSOLE]
    app[SAMPLER_TASK] = asyncio.create_task(console.sampler.run())


async def _stop(app: web.Application) -> None:
    console = app[CONSOLE]
    task = app[SAMPLER_TASK]
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await console.sampler.close()
    if console.registry is not None:
        await console.registry.close()
    await console.client.close()
