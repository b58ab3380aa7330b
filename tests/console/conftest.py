"""Fixtures of the console's tests: a kbroker broker for the module, one headless Chromium per
module (Debian's, driven by Playwright), and screenshots saved under pytest's tmp dir."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from compat_tests.broker_process import BrokerProcess, free_port
from tests.console.support import CHROMIUM, require_chromium


@pytest.fixture(scope="module")
def kbroker_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    """A kbroker process with its metrics endpoint on; (process, metrics port)."""
    metrics_port = free_port()
    broker = BrokerProcess(
        tmp_path_factory.mktemp("console-broker"),
        overrides={"metrics.port": str(metrics_port)},
    )
    broker.start(timeout=60.0)
    try:
        yield broker, metrics_port
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module's tests."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def screenshot(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Any, str], Path]:
    """``screenshot(page, name)`` saves the whole page as a PNG and prints where."""
    folder = tmp_path_factory.mktemp("console-screenshots")

    def save(page: Any, name: str) -> Path:
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")
        return path

    return save
