"""Which committed offsets of the source's groups a mirror copies."""

from __future__ import annotations

from kbroker.mirror.group_offsets import chosen_groups, offsets_to_copy


def test_groups_are_chosen_by_whole_id() -> None:
    assert chosen_groups(["app", "app-2", "other", "my-app"], "app.*") == ["app", "app-2"]


def test_offsets_of_the_source_topic_for_partitions_led_here() -> None:
    committed = {("orders", 0): (10, "m"), ("orders", 1): (20, ""), ("other", 0): (5, "")}
    found = offsets_to_copy(
        committed, source_topic="orders", topic="orders", high_watermarks={0: 100}, copied={}
    )
    assert found == {("orders", 0): (10, "m")}


def test_never_past_the_mirror_high_watermark() -> None:
    found = offsets_to_copy(
        {("src", 0): (500, "")}, source_topic="src", topic="dst", high_watermarks={0: 80}, copied={}
    )
    assert found == {("dst", 0): (80, "")}


def test_an_offset_already_copied_is_not_sent_again_but_a_reset_is() -> None:
    committed = {("t", 0): (40, "")}
    same = offsets_to_copy(
        committed, source_topic="t", topic="t", high_watermarks={0: 90}, copied={0: 40}
    )
    assert same == {}
    back = offsets_to_copy(
        committed, source_topic="t", topic="t", high_watermarks={0: 90}, copied={0: 70}
    )
    assert back == {("t", 0): (40, "")}
