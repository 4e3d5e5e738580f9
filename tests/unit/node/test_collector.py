"""The node's garbage collector settings: defaults, the operator's override, and what applying
them does to this process's collector (restored after each test)."""

from __future__ import annotations

import gc

import pytest

from scheduler.collector import ENVIRONMENT_VARIABLE, CollectorSettings, collector_settings, tune_collector


@pytest.fixture
def restored_collector():
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()


def test_by_default_young_collections_are_rarer_and_the_built_node_is_frozen() -> None:
    assert collector_settings({}) == CollectorSettings(thresholds=(50_000, 10, 10), freeze=True)
    assert collector_settings({ENVIRONMENT_VARIABLE: "  "}) == CollectorSettings()


def test_the_operator_sets_the_thresholds_or_turns_the_tuning_off() -> None:
    assert collector_settings({ENVIRONMENT_VARIABLE: "700, 10, 10"}).thresholds == (700, 10, 10)
    assert collector_settings({ENVIRONMENT_VARIABLE: "OFF"}) is None
    assert tune_collector(None) == {}


@pytest.mark.parametrize("text", ["50000,10", "a,b,c", "0,10,10", "-1,10,10", "1.5,10,10", "1,2,3,4"])
def test_a_bad_value_is_refused_with_what_is_expected(text: str) -> None:
    with pytest.raises(ValueError, match="three whole numbers"):
        collector_settings({ENVIRONMENT_VARIABLE: text})


def test_applying_sets_the_thresholds_and_freezes_what_exists(restored_collector) -> None:
    gc.unfreeze()
    kept = [[] for _ in range(1000)]  # tracked objects alive now: frozen with the rest
    applied = tune_collector(CollectorSettings(thresholds=(12_345, 7, 3)))
    assert gc.get_threshold() == (12_345, 7, 3)
    assert applied["thresholds"] == (12_345, 7, 3) and applied["frozen_objects"] >= 1000
    walked = {id(item) for item in gc.get_objects()}  # what a collection walks: the frozen are not in it
    assert not any(id(item) in walked for item in kept)
    made_later = [[]]
    assert any(item is made_later for item in gc.get_objects())


def test_without_freeze_only_the_thresholds_change(restored_collector) -> None:
    gc.unfreeze()
    applied = tune_collector(CollectorSettings(thresholds=(9_999, 5, 5), freeze=False))
    assert applied == {"thresholds": (9_999, 5, 5)} and gc.get_freeze_count() == 0
