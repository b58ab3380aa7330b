"""Fixtures of the Spark tests: one kbroker process and one SparkSession for the whole run.

A Spark JVM takes many seconds to start on a small machine, so every test shares one
session (local[2]) and one broker; tests keep apart by using topics and directories of their
own (``unique``).
The session loads Spark's Kafka connector from $KBROKER_SPARK_KAFKA_JARS when it is set,
and never fetches anything.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.broker_process import BrokerProcess

# Subprocess queries run from here, with it as their PYTHONPATH.
REPO_ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path_factory.mktemp("spark-broker"),
        overrides={"auto.create.topics.enable": "false"},
    )
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    import spark_conn
    from spark_conn.session import build_session

    session = build_session("kbroker-tests")
    session.sparkContext.setLogLevel("ERROR")
    spark_conn.register(session)
    try:
        yield session
    finally:
        session.stop()
        # py4j's gateway connection logs "Closing down" at INFO from __del__ during
        # interpreter exit, after pytest closed the log stream ("Logging error").
        logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture
def unique() -> str:
    """A name no other test uses (topics, query names)."""
    return "t" + uuid.uuid4().hex[:10]
