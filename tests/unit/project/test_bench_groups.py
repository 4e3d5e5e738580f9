"""`python -m bench groups` counts a figure only for claims the core queued: the commands it
proposes must be ones the core accepts, in the order the leader proposes them."""

from __future__ import annotations

from bench import groups
from scheduler.core import State, apply, decode_command, encode_command
from scheduler.core.model import QUEUED


def _applied(state: State, command, index: int):
    # Through the codec, as a replica sees it.
    return apply(state, decode_command(encode_command(command)), index)


def _set_up(jobs: int, now_us: int = 1_700_000_000_000_000) -> tuple[State, groups.ClaimStream, int]:
    state = State()
    specs = groups.job_specs(group=0, tag="single", count=jobs)
    leadership, apply_jobs = groups.setup_commands(specs, "n1", term=1, now_us=now_us, mono_us=5_000_000)
    assert _applied(state, leadership, 1).accepted
    assert _applied(state, apply_jobs, 2).accepted
    # A job's slots are 1 us apart: all due at once, as long as replicated time is past them.
    stream = groups.ClaimStream([s.id for s in specs], apply_jobs.issued_at_us + 1, state.epoch)
    return state, stream, now_us


def test_single_claims_round_robin_are_all_queued() -> None:
    state, stream, now_us = _set_up(jobs=3)
    queued = 0
    for index in range(3, 3 + 10):  # more entries than jobs: each job claims its next slot again
        result = _applied(state, stream.next_command(1, now_us + 1000 * index, 5_000_000 + 1000 * index), index)
        assert result.accepted
        queued += groups.queued_claims(result)
    assert queued == 10 and state.run_count == 10
    assert all(run.status == QUEUED for runs in state.runs.values() for run in runs)
    assert not state.alerts  # no late or skipped alert: the figure is claims, nothing else


def test_batched_claims_with_more_claims_than_jobs_are_all_queued() -> None:
    state, stream, now_us = _set_up(jobs=4)
    result = _applied(state, stream.next_command(10, now_us + 1000, 5_001_000), 3)
    assert groups.queued_claims(result) == 10
    result = _applied(state, stream.next_command(10, now_us + 2000, 5_002_000), 4)
    assert groups.queued_claims(result) == 10 and state.run_count == 20


def test_a_lost_entry_shows_as_claims_not_queued() -> None:
    state, stream, now_us = _set_up(jobs=2)
    stream.next_command(2, now_us + 1000, 5_001_000)  # proposed, never committed
    result = _applied(state, stream.next_command(2, now_us + 2000, 5_002_000), 3)
    assert result.accepted and groups.queued_claims(result) == 0


def _config(groups_: int, layout: str, claims_per_group: list[int], seconds: float = 2.0) -> dict:
    per_group = {
        g: {"claims": c, "entries": c, "latency_p50_ms": 1.0, "latency_p99_ms": 2.0, "stopped_after_s": None}
        for g, c in enumerate(claims_per_group)
    }
    phase = {"groups": per_group, "cpu_cores": [0.5] * 3, "seconds": seconds}
    return {"groups": groups_, "layout": layout, "processes": 3, "phases": {"single": phase}}


def test_ratios_are_to_the_median_of_the_baseline_runs() -> None:
    configs = [
        _config(1, "shared", [2_000]),
        _config(3, "shared", [1_000, 1_000, 1_000]),
        _config(1, "shared", [4_000]),
    ]
    rows, summary = groups.summarize(configs)
    aggregates = {row[0]: (row[3], row[4]) for row in rows}
    # baselines: 1,000/s and 2,000/s; their median 1,500/s; three groups: 1,500/s
    assert aggregates["single: 3 groups, shared (3 processes)"] == (1_500.0, "1.00x")
    assert aggregates["single: 1 group, baseline (run 1)"] == (1_000.0, "0.67x")
    assert summary["single_1g_shared_run2"]["aggregate_claims_per_s"] == 2_000.0
