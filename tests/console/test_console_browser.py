"""The web console in a real browser (Debian's headless Chromium, driven by Playwright)
against a kbroker process: every page with data, the message browser by offset and by time,
a lag chart that moves while a consumer catches up, record contents shown as text, and the
actions: refused by a read-only console, done by one started with --allow-writes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests.broker_process import BrokerProcess
from tests.console.pages import every_page, load, wait_sampled
from tests.console.support import (
    ConsoleProcess,
    commit_offset,
    console_process,
    consume_and_commit,
    consumer,
    create_topic,
    produce,
)

pytestmark = pytest.mark.slow

TOPIC = "orders"
GROUP = "billing"
BASE_TIMESTAMP = 1_700_000_000_000


@pytest.fixture(scope="module")
def seeded(kbroker_broker: tuple[BrokerProcess, int]) -> str:
    broker, _ = kbroker_broker
    bootstrap = broker.bootstrap
    create_topic(bootstrap, TOPIC, partitions=3)
    produce(
        bootstrap,
        TOPIC,
        [f"order-{i}".encode() for i in range(10)],
        timestamps=[BASE_TIMESTAMP + i * 1000 for i in range(10)],
    )
    produce(bootstrap, TOPIC, [b'{"id": 1, "total": 9.5}'], partition=1, key=b"k1")
    c = consumer(bootstrap, GROUP)
    assert consume_and_commit(c, TOPIC, 5) == 5
    c.close()
    return bootstrap


@pytest.fixture(scope="module")
def read_only(seeded: str, kbroker_broker: tuple[BrokerProcess, int]) -> Iterator[ConsoleProcess]:
    _, metrics_port = kbroker_broker
    metrics = f"http://127.0.0.1:{metrics_port}/metrics"
    with console_process(seeded, "--metrics-url", metrics) as console:
        yield console


@pytest.fixture(scope="module")
def writable(seeded: str) -> Iterator[ConsoleProcess]:
    with console_process(seeded, "--allow-writes") as console:
        yield console


def wait_for_last(
    page: Any, chart: str, condition: Callable[[float], bool], timeout: float
) -> None:
    """Until the newest point the chart drew satisfies ``condition`` (read from the page: the
    console's Content-Security-Policy forbids evaluating strings in it)."""
    deadline = time.monotonic() + timeout
    while True:
        last = page.locator(chart).get_attribute("data-last")
        if last is not None and condition(float(last)):
            return
        assert time.monotonic() < deadline, f"{chart}: last point {last}"
        page.wait_for_timeout(250)


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


def test_every_page_loads_with_data(
    page: Any, read_only: ConsoleProcess, screenshot: Callable[[Any, str], Path]
) -> None:
    every_page(page, read_only.url, TOPIC, GROUP, screenshot, "kbroker")
    # kbroker's Prometheus endpoint adds bytes in and out per topic to the topic's charts.
    deadline = time.monotonic() + 30
    while (
        page.locator(f"figure.chart[data-key='metric:kbroker_bytes_in_total:{TOPIC}']").count() == 0
    ):
        assert time.monotonic() < deadline, "no bytes-in chart from kbroker's metrics"
        page.wait_for_timeout(1000)
        load(page, f"{read_only.url}/topics/{TOPIC}")


def test_message_browser_finds_records_by_offset_and_by_time(
    page: Any, read_only: ConsoleProcess, screenshot: Callable[[Any, str], Path]
) -> None:
    load(page, f"{read_only.url}/topics/{TOPIC}/messages")
    page.select_option("select[name=partition]", "0")
    page.select_option("#mode", "offset")
    page.fill("input[name=offset]", "7")
    page.click("#browse-form button[type=submit]")
    first = page.locator("#records tr.record").first
    assert first.get_attribute("data-offset") == "7"
    assert first.locator("td.val pre").inner_text() == "order-7"
    screenshot(page, "kbroker-messages-by-offset")

    page.select_option("#mode", "timestamp")
    # 4.5 s after the first record: the first record at or after it is offset 5.
    page.fill("input[name=timestamp]", "2023-11-14T22:13:24.500Z")
    page.click("#browse-form button[type=submit]")
    first = page.locator("#records tr.record").first
    assert first.get_attribute("data-offset") == "5"
    assert first.locator("td.val pre").inner_text() == "order-5"

    load(page, f"{read_only.url}/topics/{TOPIC}/messages?partition=1&format=auto")
    value = page.locator("#records tr.record td.val pre").first
    assert value.get_attribute("data-kind") == "json"
    assert '"total": 9.5' in value.inner_text()


def test_record_contents_are_shown_as_text_not_markup(
    page: Any, read_only: ConsoleProcess, seeded: str, screenshot: Callable[[Any, str], Path]
) -> None:
    hostile = (
        "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
    )
    produce(seeded, TOPIC, [hostile.encode()], partition=2, key=b"<b>key</b>")
    load(page, f"{read_only.url}/topics/{TOPIC}/messages?partition=2")
    row = page.locator("#records tr.record").first
    assert row.locator("td.val pre").inner_text() == hostile
    assert row.locator("td.key pre").inner_text() == "<b>key</b>"
    assert page.locator("#records img, #records script, #records b").count() == 0
    assert page.title() != "pwned"
    screenshot(page, "kbroker-messages-script-as-text")


def test_lag_chart_moves_while_a_consumer_catches_up(
    page: Any, read_only: ConsoleProcess, seeded: str, screenshot: Callable[[Any, str], Path]
) -> None:
    topic, group = "catch-up-topic", "catch-up"
    create_topic(seeded, topic)
    produce(seeded, topic, [b"x" * 100] * 3000)
    commit_offset(seeded, group, topic, 0)
    chart = f"figure.chart[data-key='lag:{group}']"
    load(page, f"{read_only.url}/group?id={group}")
    wait_for_last(page, chart, lambda lag: lag == 3000, 30)
    done = threading.Event()

    def catch_up() -> None:
        c = consumer(seeded, group)
        try:
            while not done.is_set() and consume_and_commit(c, topic, 100, timeout=5) > 0:
                time.sleep(0.3)
        finally:
            c.close()

    worker = threading.Thread(target=catch_up, daemon=True)
    worker.start()
    try:
        # The chart refreshes itself (no reload): its newest point falls below where it began.
        wait_for_last(page, chart, lambda lag: lag < 2000, 60)
        wait_for_last(page, chart, lambda lag: lag < 500, 90)
    finally:
        done.set()
        worker.join(30)
    assert int(page.locator(chart).get_attribute("data-points") or 0) >= 3
    screenshot(page, "kbroker-lag-chart")


def test_actions_are_refused_without_allow_writes(
    page: Any, read_only: ConsoleProcess, screenshot: Callable[[Any, str], Path]
) -> None:
    load(page, f"{read_only.url}/topics")
    assert page.locator("#create-topic").count() == 0
    load(page, f"{read_only.url}/topics/{TOPIC}")
    assert page.locator("#delete-topic, #produce-record, #edit-configs").count() == 0
    # A hand-made form posted from the console's own page: refused all the same.
    page.evaluate(
        """() => {
            const form = document.createElement('form');
            form.method = 'post';
            form.action = '/topics';
            const name = document.createElement('input');
            name.name = 'name'; name.value = 'sneaky';
            form.appendChild(name);
            document.body.appendChild(form);
            form.submit();
        }"""
    )
    page.wait_for_selector("#error-message")
    assert "read-only" in page.locator("#error-message").inner_text()
    screenshot(page, "kbroker-refused-read-only")
    load(page, f"{read_only.url}/topics?q=sneaky")
    assert page.locator("#topics tr[data-name]").count() == 0


def test_actions_with_allow_writes(
    page: Any, writable: ConsoleProcess, screenshot: Callable[[Any, str], Path]
) -> None:
    base = writable.url
    load(page, base + "/topics")
    page.click("#create-topic summary")
    page.fill("#create-topic input[name=name]", "made-in-browser")
    page.fill("#create-topic input[name=partitions]", "2")
    page.fill("#create-topic textarea[name=configs]", "retention.ms=3600000")
    page.click("#create-topic button[type=submit]")
    page.wait_for_url(f"{base}/topics/made-in-browser")
    assert page.locator("#partitions tbody tr").count() == 2
    assert "3600000" in page.locator("#topic-configs tr.override").inner_text()

    page.click("#produce-record summary")
    page.fill("#produce-record input[name=partition]", "1")
    page.fill("#produce-record input[name=key]", "k")
    page.fill("#produce-record textarea[name=value]", "hello from the console")
    page.click("#produce-record button[type=submit]")
    page.wait_for_selector("#records tr.record")
    assert (
        page.locator("#records tr.record td.val pre").first.inner_text() == "hello from the console"
    )

    load(page, f"{base}/topics/made-in-browser")
    page.click("#edit-configs summary")
    page.fill("#edit-configs input[name=delete]", "retention.ms")
    page.click("#edit-configs button[type=submit]")
    page.wait_for_load_state()
    assert page.locator("#topic-configs tr.override").count() == 0

    load(page, f"{base}/group?id={GROUP}")
    page.click("#reset-offsets summary")
    page.select_option("#reset-offsets select[name=target]", "earliest")
    page.click("#reset-offsets button[type=submit]")
    page.wait_for_selector("#plan")
    assert "dry run" in page.locator("h1").inner_text()
    assert page.locator("#plan tbody tr").count() == 3
    screenshot(page, "kbroker-reset-dry-run")
    page.click("#apply-reset button[type=submit]")
    page.wait_for_selector("#lag")
    committed = page.locator("#lag tbody tr td:nth-child(3)").all_inner_texts()
    assert committed == ["0", "0", "0"]

    load(page, f"{base}/topics/made-in-browser")
    page.click("#delete-topic summary")
    page.fill("#delete-topic input[name=confirm]", "made-in-browser")
    page.click("#delete-topic button[type=submit]")
    page.wait_for_url(f"{base}/topics")
    wait_sampled(page, f"{base}/topics?q=made-in-browser")
    deadline = time.monotonic() + 30
    while page.locator("#topics tr[data-name]").count():
        assert time.monotonic() < deadline
        page.wait_for_timeout(500)
        load(page, f"{base}/topics?q=made-in-browser")
