"""Fixtures of the Spark tests: one kbroker process and one SparkSession for the whole run.

A Spark JVM takes many seconds to start on a small machine, so every test shares one
session (local[2]) and one broker; tests keep apart by using topics and directories of their
own (``unique``).

Spark's own Kafka connector (tests marked ``stock_connector``) is built for Spark 4.0 and
fails on newer Spark, while the ``kbroker`` data source is tested on the newest PySpark. So
the stock-connector tests run only where PySpark is 4.0.x (`make test` runs them in
.venv-spark40) and are deselected elsewhere. There the session loads the connector's jars
from $KBROKER_SPARK_KAFKA_JARS, or by default from ../shared/clients-jvm/ (these machines
cannot reach Maven), and never fetches anything.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

from compat_tests.broker_process import BrokerProcess
from compat_tests.java_programs import CLIENTS_JVM, KAFKA_CLIENTS_JAR
from compat_tests.support import require
from spark_conn.session import JARS_ENV, kafka_jars

# Subprocess queries run from here, with it as their PYTHONPATH.
REPO_ROOT = str(Path(__file__).resolve().parents[2])

# The Spark release the connector jars in ../shared/clients-jvm were built for.
CONNECTOR_SPARK = "4.0"
STOCK_CONNECTOR_MARK = "stock_connector"


def on_connector_spark() -> bool:
    return version("pyspark").startswith(CONNECTOR_SPARK + ".")


def connector_jars() -> list[str]:
    """Spark's Kafka connector and its dependencies: $KBROKER_SPARK_KAFKA_JARS, or the jars
    in ../shared/clients-jvm (a missing jar fails under CI=true, see `require`)."""
    if os.environ.get(JARS_ENV):
        return kafka_jars()
    jars = [
        CLIENTS_JVM / f"spark-sql-kafka-0-10_2.13-{CONNECTOR_SPARK}.0.jar",
        CLIENTS_JVM / f"spark-token-provider-kafka-0-10_2.13-{CONNECTOR_SPARK}.0.jar",
        KAFKA_CLIENTS_JAR,
        CLIENTS_JVM / "commons-pool2-2.12.0.jar",
    ]
    missing = [str(jar) for jar in jars if not jar.is_file()]
    require(not missing, f"Spark's Kafka connector jars are missing: {missing} (or set {JARS_ENV})")
    return [str(jar) for jar in jars]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the stock-connector tests unless PySpark is the connector's 4.0.x."""
    if on_connector_spark():
        return
    stock = [item for item in items if item.get_closest_marker(STOCK_CONNECTOR_MARK)]
    if stock:
        items[:] = [item for item in items if not item.get_closest_marker(STOCK_CONNECTOR_MARK)]
        config.hook.pytest_deselected(items=stock)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not on_connector_spark():
        terminalreporter.write_line(
            f"Spark's Kafka connector tests ({STOCK_CONNECTOR_MARK}) need PySpark "
            f"{CONNECTOR_SPARK}.x, not {version('pyspark')}: deselected here; `make test` "
            "runs them in .venv-spark40"
        )


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

    if on_connector_spark():
        # Spark's connector; the kbroker data source needs a newer PySpark.
        session = build_session("kbroker-tests", jars=connector_jars())
    else:
        session = build_session("kbroker-tests", jars=[])
        spark_conn.register(session)
    session.sparkContext.setLogLevel("ERROR")
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
