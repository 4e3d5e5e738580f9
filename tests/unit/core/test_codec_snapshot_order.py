"""encode_snapshot pre-sorts the state's dicts (msgspec's own sort is quadratic on some orders):
the bytes must be exactly msgspec's deterministic encoding, and the live state must not change."""

from __future__ import annotations

import random

from scheduler.core import State, encode_snapshot
from scheduler.core.codec import _STATE_FRAMES, CALENDARS_SNAPSHOT_FORMAT_VERSION, SNAPSHOT_MAGIC, _encoder


def _orders(keys: list[str]) -> dict[str, list[str]]:
    rng = random.Random(7)
    return {
        "sorted then a smaller key": sorted(keys)[1:] + [min(keys)],
        "reversed": sorted(keys, reverse=True),
        "shuffled": rng.sample(keys, len(keys)),
    }


def test_the_bytes_are_msgspecs_deterministic_encoding_whatever_the_insertion_order():
    keys = [f"job-{i:04d}" for i in range(300)] + ["Ärger", "zz", "a"]
    for order, ordered in _orders(keys).items():
        # Cluster version 3: the format that encodes every State field but the derived ones
        # (below, golden files hold the bytes).
        state = State(cluster_version=3)
        state.retired_versions.update({k: n for n, k in enumerate(ordered)})
        state.orphaned_histories.update({k: True for k in reversed(ordered)})
        frame = _STATE_FRAMES[CALENDARS_SNAPSHOT_FORMAT_VERSION]
        unsorted = frame(**{name: getattr(state, name) for name in frame.__struct_fields__})
        expected = SNAPSHOT_MAGIC + bytes((CALENDARS_SNAPSHOT_FORMAT_VERSION,)) + _encoder.encode(unsorted)
        assert encode_snapshot(state) == expected, order


def test_encoding_leaves_the_live_states_dict_order_alone():
    state = State()
    ordered = ["b", "c", "a"]
    state.retired_versions.update({k: 1 for k in ordered})
    encode_snapshot(state)
    assert list(state.retired_versions) == ordered
