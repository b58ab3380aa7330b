"""Page load times of the web console over a large cluster (issue 31): one kbroker broker
with --topics x --partitions partitions (10,000 by default) and --groups groups (1,000) with
committed offsets, the console beside it; each page is fetched --repeat times once the
console has sampled the cluster, and the median and slowest times to the whole answer are
printed, with the time the console's sampler takes to read the cluster. The list pages are
also loaded in headless Chromium (Debian's, through Playwright), to the load event.

    .venv/bin/python bench/console_pages.py [--topics 100] [--partitions 100] [--groups 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import time

# brokers, imported before kbroker and wire, puts the repository root on sys.path.
from brokers import raise_open_files_limit
from confluent_kafka.admin import AdminClient, NewTopic
from many_partitions import admin_timeout, topic_names

from compat_tests.broker_process import BrokerProcess
from kbroker.client import KafkaClient, parse_address
from tests.console.support import CHROMIUM, console_process

SAMPLED = re.compile(r"took ([0-9.]+) s")


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    timeout = admin_timeout(len(names) * partitions)
    for first in range(0, len(names), 10):
        batch = [NewTopic(n, partitions, 1) for n in names[first : first + 10]]
        for future in admin.create_topics(batch, request_timeout=timeout).values():
            future.result(timeout)


async def commit_groups(bootstrap: str, names: list[str], groups: int) -> None:
    """Each group commits an offset on a partition of one topic (no members: Empty)."""
    async with KafkaClient([parse_address(bootstrap)], timeout=60) as client:
        for i in range(groups):
            topic = names[i % len(names)]
            await client.commit(f"group-{i:04d}", {(topic, i % 7): (0, "")})


async def fetch_times(url: str, repeat: int) -> list[float]:
    import aiohttp

    times = []
    async with aiohttp.ClientSession() as session:
        for _ in range(repeat):
            started = time.perf_counter()
            async with session.get(url) as answer:
                await answer.read()
                assert answer.status == 200, (url, answer.status)
            times.append(time.perf_counter() - started)
    return times


def browser_times(urls: list[str], repeat: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    found: dict[str, list[float]] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = browser.new_page()
        for url in urls:
            found[url] = []
            for _ in range(repeat):
                started = time.perf_counter()
                page.goto(url, wait_until="load")
                found[url].append(time.perf_counter() - started)
        browser.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    total = args.topics * args.partitions
    raise_open_files_limit(total * 2 + 1000)
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="console-bench-") as work:
        broker = BrokerProcess(Path(work))
        broker.start(timeout=60)
        try:
            names = topic_names(args.topics)
            started = time.monotonic()
            create_topics(broker.bootstrap, names, args.partitions)
            asyncio.run(commit_groups(broker.bootstrap, names, args.groups))
            print(
                f"{args.topics} topics, {total} partitions, {args.groups} groups "
                f"(set up in {time.monotonic() - started:.0f} s)"
            )
            with console_process(broker.bootstrap, "--sample-interval", "10") as console:
                base = console.url
                pages = [
                    "/",
                    "/topics",
                    f"/topics/{names[0]}",
                    f"/topics/{names[0]}/messages",
                    "/groups",
                    "/group?id=group-0000",
                    "/transactions",
                ]
                deadline = time.monotonic() + 300
                took = None
                while took is None and time.monotonic() < deadline:
                    text = asyncio.run(_text(base + "/"))
                    match = SAMPLED.search(text)
                    took = float(match.group(1)) if match else None
                    time.sleep(1)
                print(f"console sampler: one sample of the whole cluster took {took} s")
                print(f"{'page':<34} {'median ms':>10} {'max ms':>8}   (server, whole answer)")
                for path in pages:
                    times = asyncio.run(fetch_times(base + path, args.repeat))
                    print(
                        f"{path:<34} {statistics.median(times) * 1000:>10.0f} "
                        f"{max(times) * 1000:>8.0f}"
                    )
                shown = browser_times([base + "/topics", base + "/groups", base + "/"], 3)
                print(f"{'page in Chromium':<34} {'median ms':>10} {'max ms':>8}   (to load)")
                for url, times in shown.items():
                    print(
                        f"{url[len(base) :]:<34} {statistics.median(times) * 1000:>10.0f} "
                        f"{max(times) * 1000:>8.0f}"
                    )
        finally:
            broker.stop()


async def _text(url: str) -> str:
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(url) as answer:
        return await answer.text()


if __name__ == "__main__":
    main()
