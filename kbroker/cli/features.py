"""``kbroker features describe``: feature versions, as ``kafka-features.sh describe`` shows them.

Options every command takes, exit statuses: see kbroker.cli.ops.output.
"""

from __future__ import annotations

import argparse
from typing import Any

from kbroker.cli.ops.features import describe_features
from kbroker.cli.ops.output import EXIT_OK, add_common_options, emit_json, run_command, table
from kbroker.client import KafkaClient


async def _describe(args: argparse.Namespace, client: KafkaClient) -> int:
    found = await describe_features(client)
    if args.json:
        emit_json(
            {
                "epoch": found.epoch,
                "features": [
                    {
                        "name": f.name,
                        "supported_min": f.supported_min,
                        "supported_max": f.supported_max,
                        "finalized": f.finalized,
                    }
                    for f in found.features
                ],
            }
        )
        return EXIT_OK
    rows = [
        (f.name, f.supported_min, f.supported_max, f.finalized, found.epoch) for f in found.features
    ]
    print(table(("FEATURE", "SUPPORTED MIN", "SUPPORTED MAX", "FINALIZED", "EPOCH"), rows))
    return EXIT_OK


def register(sub: Any) -> None:
    """``kbroker features describe``."""
    features = sub.add_parser("features", help="feature versions (KIP-584)")
    actions = features.add_subparsers(dest="action", metavar="ACTION", required=True)
    describe = actions.add_parser(
        "describe", help="supported and finalized feature levels of the cluster"
    )
    add_common_options(describe)
    describe.set_defaults(func=run_command(_describe))
