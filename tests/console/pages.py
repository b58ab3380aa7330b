"""Loading the console's pages in the browser the same way against any cluster."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

PAGE_SECONDS = 20.0


def load(page: Any, url: str) -> Any:
    """Open ``url``; it must answer 200 with no error shown."""
    response = page.goto(url, wait_until="load", timeout=PAGE_SECONDS * 1000)
    assert response is not None and response.status == 200, (url, response and response.status)
    assert page.locator("#error-message").count() == 0, page.locator("#error-message").inner_text()
    return response


def wait_sampled(page: Any, url: str, timeout: float = 60.0) -> None:
    """Reload ``url`` until the console has taken a sample of the cluster."""
    deadline = time.monotonic() + timeout
    while True:
        load(page, url)
        if "No sample yet" not in page.locator("footer").inner_text():
            return
        assert time.monotonic() < deadline, "the console never sampled the cluster"
        page.wait_for_timeout(500)


def every_page(
    page: Any,
    base: str,
    topic: str,
    group: str,
    screenshot: Callable[[Any, str], Path],
    label: str,
) -> None:
    """Each page of the console loads with the seeded topic and group in it."""
    wait_sampled(page, base + "/")
    assert int(page.locator("#topic-count").inner_text()) >= 1
    page.wait_for_selector("figure.chart[data-key='throughput']:not([data-points='0'])")
    screenshot(page, f"{label}-overview")
    load(page, base + "/topics")
    assert page.locator(f"#topics tr[data-name='{topic}']").count() == 1
    screenshot(page, f"{label}-topics")
    load(page, f"{base}/topics/{topic}")
    assert page.locator("#partitions tbody tr").count() >= 1
    assert "retention.ms" in page.locator("#topic-configs td:first-child").all_inner_texts()
    screenshot(page, f"{label}-topic")
    load(page, f"{base}/topics/{topic}/messages")
    assert page.locator("#records tr.record").count() >= 1
    screenshot(page, f"{label}-messages")
    load(page, base + "/groups")
    assert page.locator(f"#groups tr[data-name='{group}']").count() == 1
    screenshot(page, f"{label}-groups")
    load(page, f"{base}/group?id={quote(group)}")
    assert page.locator("#lag tbody tr").count() >= 1
    screenshot(page, f"{label}-group")
    for path in ("/transactions", "/access", "/settings", "/mirror"):
        load(page, base + path)
        screenshot(page, f"{label}-{path.strip('/')}")
