"""Which committed offsets of the source's consumer groups a mirror copies, pure.

Offsets are the same on both sides (the mirror keeps the source's), so a group's committed
offset for a source partition is copied unchanged to the same group here, with two limits:

- never past what the mirror has committed itself (its high watermark): a group moving here
  after ``promote`` then starts at or before the records it had not processed, never after
  records the mirror had not copied yet (at least once, no gap);
- never backwards over an offset already copied, unless the source's group moved back (a
  reset there): the copy follows the source's value, so an equal value is not sent again.

The shell (kbroker/mirror/link.py) commits the result as an admin tool does (OffsetCommit
with generation -1), which the group coordinator refuses while the group has members here:
a group that already consumes from the mirror cluster is left alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from kbroker.regex import Regex

TopicPartition = tuple[str, int]


def chosen_groups(groups: list[str], pattern: str) -> list[str]:
    regex = Regex(pattern)
    return sorted(g for g in groups if regex.matches(g))


def offsets_to_copy(
    committed: Mapping[TopicPartition, tuple[int, str]],
    *,
    source_topic: str,
    topic: str,
    high_watermarks: Mapping[int, int],
    copied: Mapping[int, int],
) -> dict[TopicPartition, tuple[int, str]]:
    """The offsets to commit here for one group: ``committed`` is the group's committed
    offsets at the source, ``high_watermarks`` the mirror partitions led here, ``copied``
    what was committed here for the group before (partition -> offset)."""
    found: dict[TopicPartition, tuple[int, str]] = {}
    for (name, partition), (offset, metadata) in committed.items():
        if name != source_topic or partition not in high_watermarks or offset < 0:
            continue
        target = min(offset, high_watermarks[partition])
        if copied.get(partition) != target:
            found[(topic, partition)] = (target, metadata)
    return found
