"""The latest metric values pushed by each client instance, as Prometheus samples.

Every accepted push replaces its instance's series with the ones it carries (clients are
asked for cumulative values, so a push holds the whole current state; a delta point is
added to the value before). Each series is labelled with ``client_instance_id``,
``client_id``, ``client_software_name`` and ``client_software_version``, then the data
point's attributes. Names are made Prometheus-safe (every character outside
``[a-zA-Z0-9_:]`` becomes ``_``: ``org.apache.kafka.producer.record.send.rate`` is
``org_apache_kafka_producer_record_send_rate``); pushed names starting with ``kbroker_``,
the broker's own families, are left out, and so is a point whose metric already has
another kind.

Bounded (rule 5 of DESIGN.md): at most MAX_CLIENTS instances (the least recently pushed is
dropped for a new one), MAX_SERIES_PER_CLIENT series from one push and MAX_SERIES in all;
points past a bound are dropped and counted. An instance's series go when it terminates or
is forgotten (kbroker/telemetry/manager.py).
"""

from __future__ import annotations

import collections
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from kbroker.telemetry.otlp import Point

MAX_CLIENTS = 1_000
MAX_SERIES_PER_CLIENT = 2_000
MAX_SERIES = 50_000
RESERVED_PREFIX = "kbroker_"
CLIENT_LABELS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
)

_UNSAFE_NAME = re.compile(r"[^a-zA-Z0-9_:]")
_UNSAFE_LABEL = re.compile(r"[^a-zA-Z0-9_]")

Labels = tuple[tuple[str, str], ...]
SeriesKey = tuple[str, Labels]


def metric_name(name: str) -> str:
    safe = _UNSAFE_NAME.sub("_", name)
    return f"_{safe}" if not safe or safe[0].isdigit() else safe


def label_name(name: str) -> str:
    safe = _UNSAFE_LABEL.sub("_", name)
    return f"_{safe}" if not safe or safe[0].isdigit() else safe


@dataclass(slots=True)
class ClientSeriesSet:
    labels: Labels
    values: dict[SeriesKey, float] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)


class TelemetrySeries:
    """Per-instance series (see the module docstring)."""

    def __init__(
        self,
        *,
        max_clients: int = MAX_CLIENTS,
        max_series_per_client: int = MAX_SERIES_PER_CLIENT,
        max_series: int = MAX_SERIES,
    ) -> None:
        self._max_clients = max_clients
        self._max_per_client = max_series_per_client
        self._max_series = max_series
        self._clients: collections.OrderedDict[uuid.UUID, ClientSeriesSet] = (
            collections.OrderedDict()
        )
        self._count = 0
        self.dropped_points = 0

    def __len__(self) -> int:
        """The number of series kept."""
        return self._count

    def clients(self) -> int:
        return len(self._clients)

    def record(self, instance_id: uuid.UUID, labels: Labels, points: Iterable[Point]) -> None:
        """An accepted push of ``instance_id``, whose own labels are ``labels``."""
        previous = self._clients.pop(instance_id, None)
        if previous is not None:
            self._count -= len(previous.values)
        while len(self._clients) >= self._max_clients:
            _, evicted = self._clients.popitem(last=False)
            self._count -= len(evicted.values)
        room = min(self._max_per_client, self._max_series - self._count)
        current = ClientSeriesSet(labels)
        own = {name for name, _ in labels}
        for point in points:
            name = metric_name(point.name)
            if name.startswith(RESERVED_PREFIX):
                self.dropped_points += 1
                continue
            if current.kinds.setdefault(name, point.kind) != point.kind:
                self.dropped_points += 1
                continue
            attributes = tuple(
                (label_name(k), v) for k, v in point.attributes if label_name(k) not in own
            )
            key = (name, attributes)
            if key not in current.values and len(current.values) >= room:
                self.dropped_points += 1
                continue
            value = point.value
            if point.delta:
                before = current.values.get(key)
                if before is None and previous is not None:
                    before = previous.values.get(key)
                value += before or 0.0
            current.values[key] = value
        self._clients[instance_id] = current
        self._count += len(current.values)

    def drop(self, instance_ids: Iterable[uuid.UUID]) -> None:
        for instance_id in instance_ids:
            gone = self._clients.pop(instance_id, None)
            if gone is not None:
                self._count -= len(gone.values)

    def families(self) -> dict[str, tuple[str, list[tuple[Labels, float]]]]:
        """Every exported metric: its kind and samples (labels, value), by name, in order."""
        out: dict[str, tuple[str, list[tuple[Labels, float]]]] = {}
        for client in self._clients.values():
            for (name, attributes), value in client.values.items():
                kind = client.kinds[name]
                family = out.setdefault(name, (kind, []))
                if family[0] == kind:
                    family[1].append(((*client.labels, *attributes), value))
        return dict(sorted(out.items()))
