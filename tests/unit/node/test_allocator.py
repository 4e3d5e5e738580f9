"""The node's malloc settings: applied unless the operator set glibc's own variables."""

from __future__ import annotations

import platform

import pytest

from scheduler.allocator import M_ARENA_MAX, M_MMAP_THRESHOLD, AllocatorSettings, tune_allocator


class FakeMallopt:
    def __init__(self, refuse: frozenset[int] = frozenset()) -> None:
        self.calls: list[tuple[int, int]] = []
        self.refuse = refuse

    def __call__(self, parameter: int, value: int) -> int:
        self.calls.append((parameter, value))
        return 0 if parameter in self.refuse else 1


def test_both_settings_are_applied_when_the_environment_sets_neither() -> None:
    mallopt = FakeMallopt()
    applied = tune_allocator(AllocatorSettings(arena_max=2, mmap_threshold_bytes=65536), {}, mallopt)
    assert mallopt.calls == [(M_ARENA_MAX, 2), (M_MMAP_THRESHOLD, 65536)]
    assert applied == {"MALLOC_ARENA_MAX": 2, "MALLOC_MMAP_THRESHOLD_": 65536}


def test_a_variable_the_operator_set_is_left_to_glibc() -> None:
    mallopt = FakeMallopt()
    applied = tune_allocator(AllocatorSettings(), {"MALLOC_ARENA_MAX": "8"}, mallopt)
    assert [parameter for parameter, _ in mallopt.calls] == [M_MMAP_THRESHOLD]
    assert list(applied) == ["MALLOC_MMAP_THRESHOLD_"]


def test_a_setting_glibc_refuses_is_not_reported_as_applied() -> None:
    applied = tune_allocator(AllocatorSettings(), {}, FakeMallopt(refuse=frozenset({M_MMAP_THRESHOLD})))
    assert list(applied) == ["MALLOC_ARENA_MAX"]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_the_real_glibc_accepts_the_defaults() -> None:
    # This changes the test process's own allocator, harmlessly: the settings every node runs with.
    applied = tune_allocator(AllocatorSettings(), {})
    assert applied == {"MALLOC_ARENA_MAX": 2, "MALLOC_MMAP_THRESHOLD_": 64 * 1024}
