"""The console's HTTP side against a kbroker process: security headers and the session
cookie, the read-only refusal, CSRF protection of every action, basic authentication over
TLS, the default address, and a cluster that cannot be reached."""

from __future__ import annotations

import base64
import re
import ssl
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from compat_tests.broker_process import BrokerProcess, free_port
from kbroker.cli import build_parser
from tests.console.support import ConsoleProcess, console_process
from tests.security.certs import write_pki

pytestmark = pytest.mark.slow
TOKEN = re.compile(r'name="csrf_token" value="([0-9a-f]+)"')


def browser_session() -> aiohttp.ClientSession:
    """A client that keeps cookies as a browser does (also those of an IP address host)."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture(scope="module")
def read_only(kbroker_broker: tuple[BrokerProcess, int]) -> Iterator[ConsoleProcess]:
    with console_process(kbroker_broker[0].bootstrap) as console:
        yield console


@pytest.fixture(scope="module")
def writable(kbroker_broker: tuple[BrokerProcess, int]) -> Iterator[ConsoleProcess]:
    with console_process(kbroker_broker[0].bootstrap, "--allow-writes") as console:
        yield console


async def test_security_headers_and_session_cookie(read_only: ConsoleProcess) -> None:
    async with aiohttp.ClientSession() as session, session.get(read_only.url + "/") as answer:
        assert answer.status == 200
        assert "script-src 'self'" in answer.headers["Content-Security-Policy"]
        assert "'unsafe-inline'" not in answer.headers["Content-Security-Policy"]
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
        assert answer.headers["X-Frame-Options"] == "DENY"
        cookie = answer.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie


async def test_read_only_refuses_every_action(
    read_only: ConsoleProcess, kbroker_broker: tuple[BrokerProcess, int]
) -> None:
    async with aiohttp.ClientSession() as session:
        for path in ("/topics", "/topics/x/delete", "/topics/x/configs", "/group/reset"):
            async with session.post(read_only.url + path, data={"name": "ro"}) as answer:
                assert answer.status == 403
                assert "read-only" in await answer.text()
        async with session.get(read_only.url + "/topics?q=ro") as answer:
            assert 'data-name="ro"' not in await answer.text()


async def test_actions_need_the_sessions_csrf_token(writable: ConsoleProcess) -> None:
    async with browser_session() as session:
        async with session.get(writable.url + "/topics") as answer:
            match = TOKEN.search(await answer.text())
            assert match is not None
            token = match.group(1)
        forged = {"name": "csrf-victim", "csrf_token": "0" * 64}
        async with session.post(writable.url + "/topics", data=forged) as answer:
            assert answer.status == 403
        missing = {"name": "csrf-victim"}
        async with session.post(writable.url + "/topics", data=missing) as answer:
            assert answer.status == 403
        other_site = {"Origin": "http://evil.example"}
        good = {"name": "csrf-victim", "csrf_token": token}
        async with session.post(writable.url + "/topics", data=good, headers=other_site) as answer:
            assert answer.status == 403
    # Another browser (another session) cannot use this session's token.
    async with browser_session() as other:
        async with other.post(writable.url + "/topics", data=good) as answer:
            assert answer.status == 403
        async with other.get(writable.url + "/topics?q=csrf-victim") as answer:
            assert 'data-name="csrf-victim"' not in await answer.text()
    async with browser_session() as session:
        async with session.get(writable.url + "/topics") as answer:
            token = TOKEN.search(await answer.text()).group(1)  # type: ignore[union-attr]
        data = {"name": "csrf-ok", "partitions": "1", "csrf_token": token}
        async with session.post(writable.url + "/topics", data=data) as answer:
            assert answer.status == 200 and answer.url.path == "/topics/csrf-ok"


async def test_basic_authentication_over_tls(
    kbroker_broker: tuple[BrokerProcess, int], tmp_path: Path
) -> None:
    pki = write_pki(tmp_path / "pki")
    users = tmp_path / "users"
    users.write_text("# who may look\nops:s3cret\n")
    with console_process(
        kbroker_broker[0].bootstrap,
        "--tls-cert", str(pki.broker_cert),
        "--tls-key", str(pki.broker_key),
        "--basic-auth-file", str(users),
    ) as console:  # fmt: skip
        assert console.url.startswith("https://")
        trust = ssl.create_default_context(cafile=str(pki.ca))
        async with aiohttp.ClientSession() as session:
            async with session.get(console.url + "/", ssl=trust) as answer:
                assert answer.status == 401
                assert answer.headers["WWW-Authenticate"].startswith("Basic ")
            async with session.get(
                console.url + "/", ssl=trust, headers=basic("ops", "nope")
            ) as answer:
                assert answer.status == 401
            right = basic("ops", "s3cret")
            async with session.get(console.url + "/topics", ssl=trust, headers=right) as answer:
                assert answer.status == 200
            plain = console.url.replace("https://", "http://")
            with pytest.raises(aiohttp.ClientError):
                async with session.get(plain + "/", headers=right) as answer:
                    await answer.read()


def test_binds_to_loopback_unless_told_otherwise() -> None:
    args = build_parser().parse_args(["console"])
    assert args.listen == ("127.0.0.1", 8080) and not args.allow_writes
    assert build_parser().parse_args(["console-consumer", "--topic", "t"]).topic == "t"


async def test_an_unreachable_cluster_is_an_error_page() -> None:
    with console_process(f"127.0.0.1:{free_port()}", "--timeout", "2") as console:
        async with aiohttp.ClientSession() as session, session.get(console.url + "/") as answer:
            assert answer.status == 502
            assert "Cannot reach the cluster" in await answer.text()
