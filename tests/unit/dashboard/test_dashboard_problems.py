"""The front page's problem queries (pure, over a State) and the pages that show them."""

from __future__ import annotations

import contextlib
import threading
from types import SimpleNamespace

from scheduler.core import model
from scheduler.core.alerts import raise_alert
from scheduler.core.log_format import STREAK_ALERTS_FORMAT
from scheduler.core.model import SECOND_US, Alert, Attempt, Job, JobSpec, KillSwitch, Run
from scheduler.core.state import State
from scheduler.core.vocabulary import AlertKind
from scheduler.dashboard import data, views
from scheduler.dashboard.problems import PROBLEM_WINDOW_US, RUNS_LOOKED_AT_PER_JOB, WAITING_AFTER_US, find_problems
from scheduler.dashboard.server import Dashboard
from scheduler.leader.worker_registry import WorkerRegistry
from scheduler.planning import parse_iso_to_us

NOW_US = parse_iso_to_us("2026-03-08T12:00:00Z")
MINUTE_US = 60 * SECOND_US


def spec(job_id: str, **fields) -> JobSpec:
    defaults = dict(schedule="* * * * *", target_kind="handler", target="reports.build", owner="fin", jitter="pinned")
    return JobSpec(id=job_id, **{**defaults, **fields})


def add_job(state: State, job_spec: JobSpec) -> None:
    state.jobs[job_spec.id] = Job.of(job_spec, 1, "alice", NOW_US - 3600 * SECOND_US, NOW_US - MINUTE_US, NOW_US)


def ended(job_id: str, scheduled_us: int, status: str, started_after_us: int = 0, **fields) -> Run:
    outcome = "success" if status == model.SUCCEEDED else "failure"
    started_us = scheduled_us + started_after_us
    attempt = Attempt(1, "ops/w1", 9, started_us, started_us + SECOND_US, outcome, fields.get("error", ""))
    return Run(job_id, scheduled_us, status, claimed_us=scheduled_us, attempts=(attempt,), attempt=1, **fields)


def quiet_state() -> State:
    state = State(now_us=NOW_US, epoch=2, leader_id="n1", leader_term=3)
    add_job(state, spec("fine"))
    for minutes in range(1, 6):
        state.add_run(ended("fine", NOW_US - minutes * MINUTE_US, model.SUCCEEDED))
    return state


def test_a_quiet_cluster_has_no_problems():
    problems = find_problems(quiet_state())
    assert problems.count == 0
    assert (problems.failing, problems.bad_slots, problems.waiting, problems.kills) == ((), (), (), ())


def fail(state: State, job_id: str, scheduled_us: int, status: str = model.FAILED, error: str = "boom") -> None:
    """A run that ended `status`, with the alert apply raises for it (at the run's end)."""
    state.add_run(ended(job_id, scheduled_us, status, error=error, reason=error))
    now_us, state.now_us = state.now_us, scheduled_us + SECOND_US
    raise_alert(state, AlertKind(status), job_id, scheduled_us, error)
    state.now_us = now_us


def test_failing_jobs_count_failures_over_the_window_not_the_last_outcome():
    state = quiet_state()
    add_job(state, spec("flaky"))
    for minutes, status in ((50, model.FAILED), (40, model.TIMED_OUT), (30, model.FAILED)):
        fail(state, "flaky", NOW_US - minutes * MINUTE_US, status, error=f"boom {minutes}")
    state.add_run(ended("flaky", NOW_US - 20 * MINUTE_US, model.SUCCEEDED))  # its last outcome is fine
    fail(state, "flaky", NOW_US - PROBLEM_WINDOW_US - MINUTE_US)  # older than the window: not counted
    add_job(state, spec("broken"))
    fail(state, "broken", NOW_US - MINUTE_US, error="KeyError: 'x'")
    problems = find_problems(state)
    assert [(f.job_id, f.failures, f.ended) for f in problems.failing] == [("flaky", 3, 4), ("broken", 1, 1)]
    flaky = problems.failing[0]
    assert flaky.last_failure_us == NOW_US - 30 * MINUTE_US and flaky.last_error == "boom 30"
    assert problems.failing_jobs == 2


def test_late_and_missed_slots_newest_first():
    state = quiet_state()
    add_job(state, spec("slow"))
    raise_alert(state, AlertKind.LATE, "slow", NOW_US - 3 * MINUTE_US, "fired 95s after its slot")
    raise_alert(state, AlertKind.MISSED, "slow", NOW_US - MINUTE_US, "not firing between A and B")
    raise_alert(state, AlertKind.SKIPPED, "slow", NOW_US - 2 * MINUTE_US, "overlap")  # not a problem here
    problems = find_problems(state)
    assert (problems.late_slots, problems.missed_slots) == (1, 1)
    assert [(s.fate, s.scheduled_us, s.detail) for s in problems.bad_slots] == [
        ("missed", NOW_US - MINUTE_US, "not firing between A and B"),
        ("late", NOW_US - 3 * MINUTE_US, "fired 95s after its slot"),
    ]


def test_runs_ended_are_counted_over_a_bounded_number_of_runs():
    state = State(now_us=NOW_US)
    add_job(state, spec("every-second", schedule="* * * * * *"))
    for n in range(RUNS_LOOKED_AT_PER_JOB + 100):
        state.add_run(ended("every-second", NOW_US - (n + 2) * SECOND_US, model.SUCCEEDED))
    fail(state, "every-second", NOW_US - SECOND_US)
    assert find_problems(state).failing[0].ended == RUNS_LOOKED_AT_PER_JOB


def queued_state(waited_us: int) -> State:
    state = quiet_state()
    add_job(state, spec("orphan", target="nobody.serves"))
    state.add_run(Run("orphan", NOW_US - waited_us, model.QUEUED, claimed_us=NOW_US - waited_us))
    state.add_run(Run("orphan", NOW_US + MINUTE_US, model.QUEUED))  # not due yet: not counted
    return state


def test_due_runs_of_a_target_no_worker_polls_on_the_leader():
    state = queued_state(waited_us=2 * SECOND_US)
    (waiting,) = find_problems(state, serving=lambda target: 0).waiting
    assert (waiting.target, waiting.due_runs, waiting.workers) == ("nobody.serves", 1, 0)
    assert waiting.oldest_due_us == NOW_US - 2 * SECOND_US
    # A worker polls it and the run waited a moment only: no problem.
    assert find_problems(state, serving=lambda target: 1).waiting == ()


def test_a_follower_lists_due_runs_that_waited_long():
    assert find_problems(queued_state(waited_us=2 * SECOND_US)).waiting == ()  # workers unknown here
    (waiting,) = find_problems(queued_state(waited_us=WAITING_AFTER_US + SECOND_US)).waiting
    assert waiting.workers is None


def test_undelivered_alerts_and_active_kills():
    state = quiet_state()
    for n, delivered in enumerate((0, 0, NOW_US)):
        key = f"fenced:fine@{n}"
        state.alerts[key] = Alert(
            key, "fenced", "fine", "fin", "default", n, "m", NOW_US - (3 - n) * MINUTE_US, delivered
        )
        state.alert_order.append(key)
    state.kills["batch"] = KillSwitch("batch", "bad data", "bob", NOW_US - MINUTE_US)
    state.kills["old"] = KillSwitch("old", "expired", "bob", NOW_US - 9 * MINUTE_US, until_us=NOW_US - MINUTE_US)
    problems = find_problems(state)
    assert problems.pending_alerts == 2 and problems.oldest_pending_alert_us == NOW_US - 3 * MINUTE_US
    assert problems.pending_alert_kinds == (("fenced", 2),)
    assert [k.job_class for k in problems.kills] == ["batch"]
    assert problems.count == 2


def test_leases_by_holder_come_from_replicated_state():
    state = quiet_state()
    add_job(state, spec("sh", target_kind="shell", target="echo hi", owner="ops"))
    for n in range(3):
        leased = Run("sh", NOW_US - n * SECOND_US, model.LEASED, worker_id="ops/w1", started_us=NOW_US - n * SECOND_US)
        leased.lease_expires_us = NOW_US + 30 * SECOND_US
        state.add_run(leased)
    (held,) = data.leases_by_holder(state).values()
    assert (held.holder, held.leases, held.targets) == ("ops/w1", 3, ("shell:ops",))
    assert held.oldest_started_us == NOW_US - 2 * SECOND_US and held.latest_expiry_us == NOW_US + 30 * SECOND_US


# -- the pages ---------------------------------------------------------------------------------


class FakeRaftLog:
    def __init__(self, state: State, role: int = 2) -> None:
        self.state, self.role = state, role
        self.lock = threading.Lock()
        self.term, self.commit_index, self.applied_index = 3, 10, 10

    def tick_stalls(self):
        return (0, 0.0)

    @contextlib.contextmanager
    def read(self):
        with self.lock:
            yield self.state

    def add_apply_listener(self, listener) -> None:
        pass

    def remove_apply_listener(self, listener) -> None:
        pass

    def raft_status(self) -> dict:
        return {"state": self.role}

    def leader_address(self) -> str:
        return "127.0.0.1:7101"


def config():
    peers = (SimpleNamespace(node_id="n1", raft_address="127.0.0.1:7101", grpc_address="127.0.0.1:7201"),)
    return SimpleNamespace(
        node_id="n1",
        peers=peers,
        herd_window_s=3600.0,
        peer_by_raft_address=lambda address: next((p for p in peers if p.raft_address == address), None),
    )


def board(state: State, role: int = 2, registry: WorkerRegistry | None = None) -> Dashboard:
    return Dashboard(FakeRaftLog(state, role), config(), workers=registry or WorkerRegistry(lambda: NOW_US))


def test_front_page_leads_with_problems_then_raft_health_and_reloads_itself():
    state = queued_state(waited_us=2 * SECOND_US)
    fail(state, "fine", NOW_US - 30 * SECOND_US, error="ValueError: <bad>")
    html = board(state).render("/", {})
    assert html.index("<h2>Problems</h2>") < html.index("<h2>Raft health</h2>")
    assert '<meta http-equiv="refresh" content="10">' in html
    assert "ValueError: &lt;bad&gt;" in html
    assert 'class="problem unserved-targets" data-count="1"' in html and "nobody.serves" in html
    assert "<script" not in html
    quiet = board(quiet_state()).render("/", {"refresh": ["0"]})
    assert "Nothing needs attention." in quiet and 'http-equiv="refresh"' not in quiet


def test_times_are_shown_to_the_second():
    state = quiet_state()
    state.now_us = NOW_US + 123_456
    html = board(state).render("/", {})
    assert "2026-03-08T12:00:00Z" in html and "12:00:00.123456Z</time>" not in html
    assert views.when(NOW_US + 999_999) == ('<time datetime="2026-03-08T12:00:00.999999Z">2026-03-08T12:00:00Z</time>')


def test_workers_page_on_the_leader_lists_what_it_heard_and_the_leases_held():
    state = quiet_state()
    leased = Run("fine", NOW_US, model.LEASED, worker_id="ops/w1", started_us=NOW_US, lease_expires_us=NOW_US + 1)
    state.add_run(leased)
    registry = WorkerRegistry(lambda: NOW_US - 3 * SECOND_US)
    registry.leased("ops/w1", ["reports.build"], "ipv4:127.0.0.1:5000")
    registry.leased("ops/idle", [], "ipv4:127.0.0.1:5001")
    html = board(state, registry=registry).render("/workers", {})
    assert html.count('<span class="worker">') == 2
    assert "reports.build" in html and "every target" in html and "ipv4:127.0.0.1:5000" in html
    assert '<span class="leases">1</span>' in html and '<span class="leases">0</span>' in html
    assert '<meta http-equiv="refresh" content="10">' in html


def test_workers_page_on_a_follower_says_where_the_workers_are_known():
    state = quiet_state()
    state.add_run(Run("fine", NOW_US, model.LEASED, worker_id="ops/w1", lease_expires_us=NOW_US + 1))
    html = board(state, role=0).render("/workers", {})
    assert "This node is not the leader" in html and "not heard by this node" in html
    assert '<span class="leases">1</span>' in html


def test_a_failed_python_run_shows_its_error_not_exit_code_0():
    state = quiet_state()
    state.add_run(ended("fine", NOW_US - 30 * SECOND_US, model.FAILED, error="KeyError: 'customer'"))
    html = board(state).render(f"/runs/fine/{NOW_US - 30 * SECOND_US}", {})
    assert '<span class="exit-code no-exit-code">none</span>' in html
    assert "KeyError: &#x27;customer&#x27;" in html
    succeeded = board(state).render(f"/runs/fine/{NOW_US - MINUTE_US}", {})
    assert 'class="exit-code"' not in succeeded  # a handler has no exit code at all


def test_a_streak_of_missed_slots_counts_every_slot():
    state = quiet_state()
    state.cluster_version = STREAK_ALERTS_FORMAT
    add_job(state, spec("outage"))
    for minutes in (30, 29, 28):
        raise_alert(state, AlertKind.MISSED, "outage", NOW_US - minutes * MINUTE_US, "not firing")
    problems = find_problems(state)
    assert problems.missed_slots == 3
    (slot,) = problems.bad_slots
    assert slot.scheduled_us == NOW_US - 30 * MINUTE_US
    assert slot.detail == "3 slots in a row, the last 2026-03-08T11:32:00Z: not firing"
