"""The dispatcher's request log (debug level) and per-API request metrics."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from kbroker.config import BrokerConfig
from kbroker.dispatch import Dispatcher
from kbroker.features import DEFAULT_FINALIZED
from kbroker.quotas import QuotaManager
from kbroker.server.connection import CloseConnection
from wire.api_keys import ApiKey
from wire.messages.api_versions_request import ApiVersionsRequest
from wire.messages.request_header import RequestHeader


def _dispatcher() -> Dispatcher:
    broker = SimpleNamespace(
        config=BrokerConfig.from_properties({}),
        quotas=QuotaManager(dict, clock=lambda: 0.0),
        features=DEFAULT_FINALIZED,
    )
    broker.dispatcher = Dispatcher(broker)
    return broker.dispatcher


async def test_each_request_is_logged_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    dispatcher = _dispatcher()
    header = RequestHeader(
        request_api_key=ApiKey.API_VERSIONS, request_api_version=3, correlation_id=7, client_id="c"
    )
    with caplog.at_level(logging.DEBUG, logger="kbroker.request"):
        await dispatcher.handle(header, ApiVersionsRequest())
    [record] = [r for r in caplog.records if r.name == "kbroker.request"]
    assert record.levelno == logging.DEBUG
    assert record.kv_fields["api"] == "API_VERSIONS"
    assert record.kv_fields["correlation_id"] == 7
    assert record.kv_fields["failed"] is False
    assert dispatcher.metrics.latency["API_VERSIONS"].count == 1


async def test_request_log_is_silent_at_info(caplog: pytest.LogCaptureFixture) -> None:
    dispatcher = _dispatcher()
    header = RequestHeader(request_api_key=ApiKey.API_VERSIONS, request_api_version=0)
    with caplog.at_level(logging.INFO):
        await dispatcher.handle(header, ApiVersionsRequest())
    assert not [r for r in caplog.records if r.name == "kbroker.request"]


async def test_a_failing_handler_is_counted_as_failed() -> None:
    dispatcher = _dispatcher()
    # Metadata needs the broker's metadata backend, which the stand-in broker lacks.
    header = RequestHeader(request_api_key=ApiKey.METADATA, request_api_version=12)
    with pytest.raises(AttributeError):
        await dispatcher.handle(header, object())
    assert dispatcher.metrics.failed == {"METADATA": 1}


async def test_unsupported_api_closes_without_counting() -> None:
    dispatcher = _dispatcher()
    header = RequestHeader(request_api_key=ApiKey.DESCRIBE_QUORUM, request_api_version=0)
    with pytest.raises(CloseConnection):
        await dispatcher.handle(header, object())
    assert dispatcher.metrics.latency == {}
