"""``kbroker features describe`` against a broker process."""

from __future__ import annotations

import json

from tests.ops.conftest import Cli, OpsBroker


def test_features_describe(ops_broker: OpsBroker, cli: Cli) -> None:
    b = ("--bootstrap-server", ops_broker.bootstrap)
    described = json.loads(cli("features", "describe", *b, "--json").out)
    features = {f["name"]: f for f in described["features"]}
    assert features["transaction.version"] == {
        "name": "transaction.version",
        "supported_min": 0,
        "supported_max": 2,
        "finalized": 2,
    }
    assert features["group.version"]["finalized"] == 1
    assert features["share.version"]["finalized"] == 1
    shown = cli("features", "describe", *b)
    assert shown.code == 0, shown.err
    assert "transaction.version" in shown.out and "FINALIZED" in shown.out
