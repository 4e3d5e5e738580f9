"""The history checker catches each planted violation, and passes a clean history."""

from __future__ import annotations

import dataclasses

from tests.chaos.checker import (
    AckedWrite,
    Answer,
    Attempt,
    Grant,
    History,
    RunObs,
    SinkWrite,
    check,
)

S = 1_000_000
T0 = 1_700_000_000 * S
NODES = ("n1", "n2", "n3")


def _clean() -> History:
    """Two every-second slots of job a, one retried and succeeded run of job b, one manual run."""
    runs = [
        RunObs("a", T0, "queued", 10),
        RunObs("a", T0 + S, "missed", 11, reason="found 700s late"),
        RunObs(
            "b",
            T0,
            "succeeded",
            10,
            token=14,
            attempts=(Attempt(12, "lease_expired", T0 + 1, T0 + 5, "w1"), Attempt(14, "success", T0 + 6, T0 + 7, "w2")),
        ),
        RunObs("m", T0 + 3, "queued", 13, kind="manual", request="t-1"),
    ]
    return History(
        replicas={node: list(runs) for node in NODES},
        jobs={node: {"a": 1, "b": 1, "m": 1, "w": 2} for node in NODES},
        digests={node: (20, "d" * 64) for node in NODES},
        expected_replicas=NODES,
        interim={"n1": [runs[0]]},
        due={"a": [T0, T0 + S], "b": [T0]},
        grants=[Grant("b", T0, 12, "w1", 100), Grant("b", T0, 14, "w2", 300)],
        answers=[
            Answer("heartbeat", "b", T0, 12, "ok", sent_us=50 + 100),
            Answer("complete", "b", T0, 12, "fenced", sent_us=400, kind="success"),
            Answer("complete", "b", T0, 14, "ok", sent_us=500, kind="success"),
        ],
        sink=[SinkWrite(1, "b", T0, 14, True, "w2"), SinkWrite(2, "b", T0, 12, False, "w1")],
        sink_jobs=frozenset({"b"}),
        acked=[AckedWrite("job", "w", version=2), AckedWrite("run", "m", T0 + 3, request="t-1")],
        resources={node: _flat_memory(60) for node in NODES},
    )


def _flat_memory(seconds: int, mib: int = 70) -> list[tuple[float, int, int]]:
    """A node sampled every second, its memory flat (a little noise), its journal small."""
    return [(float(t), (mib + t % 3) * 1024, 1 << 20) for t in range(seconds)]


def _checks(history: History) -> set[str]:
    return {v.check for v in check(history)}


def _on_every_replica(history: History, runs: list[RunObs]) -> History:
    return dataclasses.replace(history, replicas={node: list(runs) for node in NODES})


def test_a_clean_history_passes():
    assert check(_clean()) == []


def test_a_run_key_claimed_twice_is_caught():
    history = _clean()
    runs = history.replicas["n1"] + [RunObs("a", T0, "queued", 17)]
    assert "no_double_claim" in _checks(_on_every_replica(history, runs))


def test_a_request_that_created_two_runs_is_caught():
    history = _clean()
    runs = history.replicas["n1"] + [RunObs("m", T0 + 4, "queued", 15, kind="manual", request="t-1")]
    assert "no_double_claim" in _checks(_on_every_replica(history, runs))


def test_a_lost_slot_is_caught():
    history = _clean()
    runs = [r for r in history.replicas["n1"] if r.key != ("a", T0 + S)]
    assert "slots_accounted" in _checks(_on_every_replica(history, runs))


def test_a_slot_skipped_without_a_reason_is_caught():
    history = _clean()
    runs = [dataclasses.replace(r, reason="") if r.status == "missed" else r for r in history.replicas["n1"]]
    assert "slots_accounted" in _checks(_on_every_replica(history, runs))


def test_a_run_at_an_instant_that_is_no_slot_is_caught():
    history = dataclasses.replace(_clean(), due={"a": [T0, T0 + 2 * S]})
    runs = history.replicas["n1"] + [RunObs("a", T0 + 2 * S, "queued", 18)]
    assert "slots_accounted" in _checks(_on_every_replica(history, runs))


def test_a_stale_write_accepted_by_the_sink_is_caught():
    history = dataclasses.replace(_clean(), sink=[SinkWrite(1, "b", T0, 14, True), SinkWrite(2, "b", T0, 12, True)])
    assert "stale_rejected_by_sink" in _checks(history)


def test_a_sink_write_with_a_token_never_granted_is_caught():
    history = dataclasses.replace(_clean(), sink=[SinkWrite(1, "b", T0, 14, True), SinkWrite(2, "b", T0, 99, True)])
    assert "stale_rejected_by_sink" in _checks(history)


def test_a_sink_write_of_a_run_the_cluster_lost_is_caught():
    history = dataclasses.replace(
        _clean(), sink=[SinkWrite(1, "b", T0, 14, True), SinkWrite(2, "a", T0 + 7 * S, 30, True)]
    )
    assert _checks(history) == {"acked_durable"}


def test_a_success_without_its_effect_is_caught():
    history = dataclasses.replace(_clean(), sink=[SinkWrite(1, "b", T0, 12, True)])
    assert "at_least_once" in _checks(history)


def test_a_stale_heartbeat_accepted_by_the_cluster_is_caught():
    history = _clean()
    late = Answer("heartbeat", "b", T0, 12, "ok", sent_us=350)
    assert "stale_rejected_by_cluster" in _checks(dataclasses.replace(history, answers=history.answers + [late]))


def test_two_overlapping_leases_in_the_log_are_caught():
    history = _clean()
    overlapping = RunObs(
        "b",
        T0,
        "succeeded",
        10,
        token=14,
        attempts=(Attempt(12, "", T0 + 1, 0, "w1"), Attempt(14, "success", T0 + 6, T0 + 7, "w2")),
    )
    runs = [overlapping if r.job_id == "b" else r for r in history.replicas["n1"]]
    assert "one_lease_at_a_time" in _checks(_on_every_replica(history, runs))


def test_tokens_that_do_not_grow_are_caught():
    history = _clean()
    shrinking = RunObs(
        "b",
        T0,
        "succeeded",
        10,
        token=11,
        attempts=(Attempt(12, "lease_expired", T0 + 1, T0 + 5, "w1"), Attempt(11, "success", T0 + 6, T0 + 7, "w2")),
    )
    runs = [shrinking if r.job_id == "b" else r for r in history.replicas["n1"]]
    assert "one_lease_at_a_time" in _checks(_on_every_replica(history, runs))


def test_an_acknowledged_but_lost_job_write_is_caught():
    history = _clean()
    jobs = {**history.jobs, "n3": {"a": 1, "b": 1, "m": 1}}
    assert "acked_durable" in _checks(dataclasses.replace(history, jobs=jobs))


def test_an_acknowledged_but_lost_run_is_caught():
    history = dataclasses.replace(_clean(), acked=[AckedWrite("run", "m", T0 + 9, request="t-2")])
    assert "acked_durable" in _checks(history)


def test_an_acknowledged_completion_missing_from_the_log_is_caught():
    history = _clean()
    lost = Answer("complete", "b", T0, 12, "ok", sent_us=200, kind="success")
    assert "acked_durable" in _checks(dataclasses.replace(history, answers=history.answers + [lost]))


def test_a_granted_lease_missing_from_the_log_is_caught():
    history = _clean()
    ghost = Grant("b", T0, 13, "w3", 200)
    assert "acked_durable" in _checks(dataclasses.replace(history, grants=history.grants + [ghost]))


def test_diverging_replicas_are_caught():
    history = _clean()
    digests = {**history.digests, "n2": (20, "e" * 64)}
    assert "replicas_agree" in _checks(dataclasses.replace(history, digests=digests))
    assert "replicas_agree" in _checks(dataclasses.replace(history, digests={"n1": (20, "d" * 64)}))


def test_a_claim_seen_mid_scenario_but_lost_is_caught():
    history = dataclasses.replace(_clean(), interim={"n1": [RunObs("a", T0 + 5 * S, "queued", 19)]})
    assert "interim_survives" in _checks(history)


def test_a_claim_seen_before_a_power_cut_and_claimed_again_after_it_is_caught():
    # Its entry was lost with the journals; the new leader claimed the slot again, at another entry.
    history = dataclasses.replace(_clean(), interim={"n1 before the cut": [RunObs("a", T0, "queued", 9)]})
    assert _checks(history) == {"interim_survives"}


def test_log_alerts_and_failed_expectations_are_reported():
    history = dataclasses.replace(
        _clean(),
        log_alerts=["n2: CRITICAL truncating already-applied log entries"],
        expectations=[("new leader", False, "no leader after the kill")],
    )
    assert _checks(history) == {"clean_logs", "scenario"}


def _with_node_samples(history: History, node: str, samples) -> History:
    return dataclasses.replace(history, resources={**history.resources, node: samples})


def test_a_node_over_its_memory_ceiling_is_caught():
    samples = _flat_memory(60)
    samples[30] = (30.0, 900 * 1024, 1 << 20)
    assert _checks(_with_node_samples(_clean(), "n2", samples)) == {"memory_and_log_bounded"}


def test_a_raft_journal_that_keeps_growing_is_caught():
    samples = [(float(t), 70 * 1024, (1 << 20) * 8 * t) for t in range(60)]
    assert _checks(_with_node_samples(_clean(), "n1", samples)) == {"memory_and_log_bounded"}


def test_memory_growing_through_a_long_run_is_caught_and_a_flat_one_is_not():
    leaking = [(float(t), (60 + t // 2) * 1024, 1 << 20) for t in range(600)]  # +0.5 MiB/s: 360 MiB at the end
    assert _checks(_with_node_samples(_clean(), "n3", leaking)) == {"memory_and_log_bounded"}
    assert _checks(_with_node_samples(_clean(), "n3", _flat_memory(600, mib=300))) == set()


def test_a_node_never_sampled_is_caught():
    history = _clean()
    assert _checks(dataclasses.replace(history, resources={"n1": history.resources["n1"]})) == {
        "memory_and_log_bounded"
    }
