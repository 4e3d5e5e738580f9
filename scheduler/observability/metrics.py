"""Prometheus metrics of one node, in a registry of its own, computed at scrape time.

Two parts:

- `ApplyObserver`, an apply listener (tick thread, state lock held), only increments plain
  integers: counters of applied entries and of lease/run events, two histograms, and the
  per-job run tally (tally.py). No prometheus_client object is touched there, no lock
  beyond the one already held, no I/O.
- `RaftcronCollector` turns those integers, the Raft facts, a short read of replicated state
  and the leader's dispatch queue into metric families when Prometheus scrapes.

Counters and histograms count what this process applied since it started, leaving out the
entries it replays from its own journal at start (they were counted before the restart), so
a restart resets them (as Prometheus expects) without a spike. Every replica applies the
same entries, so every node reports the same event counts; the gauges that differ between
nodes are the Raft ones and the leader-only dispatch queue.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from scheduler.config import DEFAULT_METRICS_MAX_JOBS
from scheduler.core import results as ev
from scheduler.core.commands import CompleteRuns, ExpireLeases, ExtendLeases
from scheduler.core.model import QUEUED, RUN_STATUSES, SECOND_US
from scheduler.core.vocabulary import RunKind, RunStatus
from scheduler.membership import members_view
from scheduler.observability.job_metrics import JobOutcomes, job_families
from scheduler.observability.tally import RunTally
from scheduler.replication.journal import SYNC_BUCKETS_S
from scheduler.replication.raftlog import ROLE_NAMES
from scheduler.rpc.cluster import node_ready

log = logging.getLogger("raftcron.observability")

# Claim lateness: most claims land within tens of milliseconds; minutes mean an outage.
LATENESS_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
APPLY_DELAY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Runs recounted per hold of the state lock at scrape time (about 1-2 ms of work).
SYNC_BUDGET_RUNS = 20_000

_FENCED_OPS = {ExtendLeases: "heartbeat", CompleteRuns: "complete", ExpireLeases: "expire"}
_RAFT_ROLES = ("leader", "follower", "candidate")
# pysyncobj reports a connected partner with this value.
_CONNECTED = 2


class _Histogram:
    """Bucket counts as plain integers: observing is a bisect and two additions."""

    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def snapshot(self) -> tuple[list[tuple[str, float]], float]:
        buckets, running = [], 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts):
            running += count
            buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
        return buckets, self.sum


class ApplyObserver:
    """The apply listener: `raftlog.add_apply_listener(observer)`."""

    def __init__(self, wall_clock_us: Callable[[], int] | None = None) -> None:
        self._wall_clock_us = wall_clock_us or (lambda: time.time_ns() // 1000)
        self.tally = RunTally()
        # Each job's last success and failure, for the per-job series (job_metrics.py).
        self.job_outcomes = JobOutcomes()
        # Entries at or below this index were applied before this process started (journal replay).
        self.replayed_until = 0
        self.entries: Counter[tuple[str, str]] = Counter()
        self.claimed: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.grants = 0
        self.refusals: Counter[str] = Counter()
        self.expiries: Counter[tuple[str, str]] = Counter()
        self.fenced: Counter[tuple[str, str]] = Counter()
        self.lateness = _Histogram(LATENESS_BUCKETS_S)
        self.apply_delay: dict[str, _Histogram] = {}

    def __call__(self, command, result, state) -> None:
        self.tally.on_apply(state, command, result)
        if result.index == state.applied_index:  # not a retried request answered with its first result
            self.job_outcomes.on_apply(state, command, result)
        if result.index <= self.replayed_until:
            return
        name = type(command).__name__
        if result.index != state.applied_index:
            return  # a retried request answered with its first result: applied before, changed nothing
        self.entries[(name, "accepted" if result.rejection is None else result.rejection.code)] += 1
        issued_at_us = getattr(command, "issued_at_us", 0)
        if issued_at_us:
            histogram = self.apply_delay.get(name)
            if histogram is None:
                histogram = self.apply_delay[name] = _Histogram(APPLY_DELAY_BUCKETS_S)
            histogram.observe(max(0, self._wall_clock_us() - issued_at_us) / SECOND_US)
        if result.rejection is not None:
            return
        for event in result.all_events():
            kind = type(event)
            if kind is ev.RunClaimed:
                self.claimed[event.status] += 1
                if event.status == QUEUED:
                    self._observe_lateness(state, event)
            elif kind is ev.LeaseGranted:
                self.grants += 1
            elif kind is ev.LeaseNotGranted:
                self.refusals[event.reason.partition(":")[0]] += 1  # resource_busy:NAME -> resource_busy
            elif kind is ev.LeaseFenced:
                self.fenced[(_FENCED_OPS.get(type(command), "other"), event.reason)] += 1
            elif kind is ev.RunSucceeded:
                self.outcomes[RunStatus.SUCCEEDED] += 1
            elif kind is ev.RunEnded:
                self.outcomes[event.status] += 1
            elif kind is ev.RunRetryScheduled:
                self.outcomes["retry_scheduled"] += 1
        if isinstance(command, ExpireLeases):
            # One event per expiry, in order: an expiry that took effect ends the attempt.
            for expiry, event in zip(command.expiries, result.events):
                if isinstance(event, ev.RunRetryScheduled):
                    self.expiries[(expiry.reason, "retry")] += 1
                elif isinstance(event, ev.RunEnded):
                    self.expiries[(expiry.reason, "ended")] += 1

    def _observe_lateness(self, state, event: ev.RunClaimed) -> None:
        """How late a scheduled slot was claimed: replicated time at the claim minus the slot.

        Replicated time at a claim is the leader's clock reading at the start of the trigger
        pass that planned it (bounded by its monotonic clock), so this is trigger lateness, not
        commit latency. Herd spreading (`effective_us`) comes after the claim and is not
        counted; manual and backfill runs are left out (their slot is not a schedule's).
        """
        run = state.get_run(event.job_id, event.scheduled_us)
        if run is not None and run.kind == RunKind.SCHEDULED:
            self.lateness.observe(max(0, run.claimed_us - run.scheduled_us) / SECOND_US)


def dispatcher_queue_depths(dispatcher) -> dict[tuple[str, str], int]:
    """(target, stage) -> entries in the leader's in-memory run queue (see Dispatcher.queue_depths).

    stage "ready": due, waiting for a worker of that target; "pending": not due when last
    looked at (herd spreading, retry backoff, an overlap recheck); "held": due, waiting for room
    in a dependency budget.
    """
    return {} if dispatcher is None else dispatcher.queue_depths()


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("raftcron")
    except Exception:  # not installed as a distribution (a bare checkout)
        return "unknown"


class RaftcronCollector(Collector):
    def __init__(
        self,
        raftlog,
        config,
        observer: ApplyObserver,
        current_dispatcher: Callable[[], object | None] = lambda: None,
        leading_epoch: Callable[[], int] = lambda: 0,
    ) -> None:
        self._raftlog = raftlog
        self._config = config
        self._observer = observer
        self._current_dispatcher = current_dispatcher
        self._leading_epoch = leading_epoch
        self._version = _version()
        observer.job_outcomes.max_jobs = getattr(config, "metrics_max_jobs", DEFAULT_METRICS_MAX_JOBS)

    def describe(self) -> Iterable:
        return []  # computed at scrape time; registering must not scrape

    def collect(self) -> Iterator:
        yield from self._raft_families()
        gathered = self._read_state()
        yield from self._state_families(gathered)
        yield from job_families(gathered["job_outcomes"])
        yield from self._dispatch_families()

    # -- Raft facts: read from pysyncobj, no state lock ---------------------------
    def _raft_families(self) -> Iterator:
        raftlog, config = self._raftlog, self._config
        info = GaugeMetricFamily(
            "raftcron_node_info", "This node: id and software version.", labels=["node_id", "version"]
        )
        info.add_metric([config.node_id, self._version], 1)
        yield info
        try:
            status = raftlog.raft_status()
        except RuntimeError:  # a peer table resized while pysyncobj listed it: report without it
            status = {}
        role = ROLE_NAMES.get(status.get("state"), "unknown")
        roles = GaugeMetricFamily("raftcron_raft_role", "Raft role of this node (one-hot).", labels=["role"])
        for name in _RAFT_ROLES:
            roles.add_metric([name], 1 if role == name else 0)
        yield roles
        commit, applied = raftlog.commit_index, raftlog.applied_index
        yield _gauge(
            "raftcron_raft_is_leader",
            "1 if pysyncobj says this node leads (fencing uses epochs, not this).",
            1 if raftlog.is_leader() else 0,
        )
        yield _gauge("raftcron_raft_term", "Current Raft term.", raftlog.term)
        yield _gauge("raftcron_raft_commit_index", "Highest log index known committed.", commit)
        yield _gauge("raftcron_raft_applied_index", "Highest log index applied to this replica's state.", applied)
        yield _gauge(
            "raftcron_raft_commit_lag",
            "Committed entries not yet applied here (commit - applied).",
            max(0, commit - applied),
        )
        yield _gauge(
            "raftcron_raft_has_quorum",
            "1 if this node is in contact with a majority.",
            1 if status.get("has_quorum") else 0,
        )
        stalls, longest_gap_s = raftlog.tick_stalls()
        yield CounterMetricFamily(
            "raftcron_raft_tick_stalls",
            "Raft ticks that started 0.25 s or more after the "
            "previous one (nothing sent or read meanwhile; elections follow 0.5-1.5 s).",
            value=stalls,
        )
        yield _gauge(
            "raftcron_raft_tick_gap_max_seconds",
            "Longest gap between two Raft ticks since this node started.",
            longest_gap_s,
        )
        syncs, sync_counts, sync_seconds = raftlog.journal_syncs()
        yield CounterMetricFamily(
            "raftcron_raft_journal_syncs",
            "Syncs of the Raft journal (one per tick that added or cut entries; none with raft.sync off).",
            value=syncs,
        )
        buckets, running = [], 0
        for bound, count in zip((*SYNC_BUCKETS_S, float("inf")), sync_counts):
            running += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), running))
        if buckets:
            yield HistogramMetricFamily(
                "raftcron_raft_journal_sync_seconds",
                "Time to write and sync the journal's new entries, per sync.",
                buckets=buckets,
                sum_value=sync_seconds,
            )
        yield _gauge(
            "raftcron_raft_log_entries", "Entries in the Raft log since the last compaction.", status.get("log_len", 0)
        )
        peers = GaugeMetricFamily(
            "raftcron_raft_peer_connected", "1 if the Raft link to this peer is up.", labels=["peer"]
        )
        with raftlog.read() as state:
            members = members_view(config, state)  # members that joined later have no config entry
        for peer in members:
            if peer.node_id != config.node_id:
                connected = status.get(f"partner_node_status_server_{peer.raft_address}") == _CONNECTED
                peers.add_metric([peer.node_id], 1 if connected else 0)
        yield peers
        yield _gauge(
            "raftcron_ready",
            "1 when a leader is known that opened an epoch this node has applied.",
            1 if node_ready(raftlog, config) else 0,
        )
        yield _gauge(
            "raftcron_leading_epoch",
            "Epoch this node leads with its loops running (0: not leading).",
            self._leading_epoch(),
        )

    # -- replicated state: a few short reads ----------------------------------------
    def _read_state(self) -> dict:
        observer = self._observer
        while True:
            with self._raftlog.read() as state:
                if not observer.tally.sync(state, SYNC_BUDGET_RUNS):
                    continue  # released the lock: applies go on between recount chunks
                return self._gather(state)

    def _gather(self, state) -> dict:
        """Everything read from state and the observer, inside one hold of the state lock."""
        observer, tally = self._observer, self._observer.tally
        alerts = getattr(state, "alerts", None)
        pending_kinds: Counter[str] = Counter()
        oldest_pending_us = 0
        if alerts:
            for alert in alerts.values():
                if not alert.delivered_us:
                    pending_kinds[alert.kind] += 1
                    if not oldest_pending_us or alert.created_us < oldest_pending_us:
                        oldest_pending_us = alert.created_us
        kills = getattr(state, "kills", None) or {}
        return {
            "epoch": state.epoch,
            "now_us": state.now_us,
            "clock_ignored_us": state.clock_ignored_us,
            "jobs": len(state.jobs),
            "paused_jobs": tally.paused_jobs,
            "run_count": state.run_count,
            "runs": dict(tally.totals),
            "live_by_target": dict(tally.live_by_target),
            "live_by_resource": dict(tally.live_by_resource),
            "resource_leased": dict(state.resource_leased),
            "resources": {name: r.max_concurrent for name, r in state.resources.items()},
            "kills": sum(1 for kill in kills.values() if kill.until_us == 0 or state.now_us < kill.until_us),
            "alerts": None if alerts is None else len(alerts),
            "pending_kinds": dict(pending_kinds),
            "oldest_pending_s": (state.now_us - oldest_pending_us) / SECOND_US if oldest_pending_us else 0.0,
            "recounted_runs": tally.recounted_runs,
            "entries": dict(observer.entries),
            "claimed": dict(observer.claimed),
            "outcomes": dict(observer.outcomes),
            "grants": observer.grants,
            "refusals": dict(observer.refusals),
            "expiries": dict(observer.expiries),
            "fenced": dict(observer.fenced),
            "lateness": observer.lateness.snapshot(),
            "lateness_count": observer.lateness.count,
            "apply_delay": {name: h.snapshot() for name, h in observer.apply_delay.items()},
            "job_outcomes": observer.job_outcomes.gather(state),
        }

    def _state_families(self, s: dict) -> Iterator:
        yield _gauge("raftcron_leader_epoch", "Current leadership epoch in replicated state.", s["epoch"])
        yield _gauge(
            "raftcron_replicated_time_seconds",
            "Replicated time (the epoch leader's clock), Unix seconds.",
            s["now_us"] / SECOND_US,
        )
        yield _gauge(
            "raftcron_clock_ignored_seconds",
            "How far the leader's last clock reading ran ahead of its monotonic bound (0: none).",
            s["clock_ignored_us"] / SECOND_US,
        )
        yield _gauge("raftcron_jobs", "Jobs defined.", s["jobs"])
        yield _gauge("raftcron_jobs_paused", "Jobs paused.", s["paused_jobs"])
        yield _gauge(
            "raftcron_runs_retained", "Runs kept in replicated state (bounded history plus live runs).", s["run_count"]
        )
        runs = GaugeMetricFamily("raftcron_runs", "Runs kept in replicated state, by status.", labels=["status"])
        statuses = list(RUN_STATUSES) + sorted(set(s["runs"]) - set(RUN_STATUSES))
        for status in statuses:
            runs.add_metric([status], s["runs"].get(status, 0))
        yield runs
        live = GaugeMetricFamily(
            "raftcron_runs_live",
            'Queued and leased runs per worker target (handler name or "shell"); queued includes runs not yet due.',
            labels=["target", "status"],
        )
        for (target, status), count in sorted(s["live_by_target"].items()):
            if count:
                live.add_metric([target, status], count)
        yield live
        queued = GaugeMetricFamily(
            "raftcron_resource_queued_runs", "Queued runs of jobs using each resource.", labels=["resource"]
        )
        leased = GaugeMetricFamily(
            "raftcron_resource_leased_runs", "Leases counted against each resource's budget.", labels=["resource"]
        )
        limit = GaugeMetricFamily(
            "raftcron_resource_max_concurrent", "Each resource's concurrency budget (0: none).", labels=["resource"]
        )
        names = set(s["resources"]) | set(s["resource_leased"]) | {n for n, _ in s["live_by_resource"]}
        for name in sorted(names):
            queued.add_metric([name], s["live_by_resource"].get((name, QUEUED), 0))
            leased.add_metric([name], s["resource_leased"].get(name, 0))
            if name in s["resources"]:
                limit.add_metric([name], s["resources"][name])
        yield queued
        yield leased
        yield limit
        yield _gauge("raftcron_job_classes_killed", "Job classes stopped by an active kill switch.", s["kills"])
        if s["alerts"] is not None:
            yield _gauge("raftcron_alerts_retained", "Alert records kept in replicated state.", s["alerts"])
            pending = GaugeMetricFamily(
                "raftcron_alerts_pending", "Alerts not yet delivered to their owner, by kind.", labels=["kind"]
            )
            for kind, count in sorted(s["pending_kinds"].items()):
                pending.add_metric([kind], count)
            yield pending
            yield _gauge(
                "raftcron_alert_oldest_pending_seconds",
                "Age of the oldest undelivered alert in replicated time (0: none pending).",
                s["oldest_pending_s"],
            )
        yield from self._counter_families(s)

    def _counter_families(self, s: dict) -> Iterator:
        entries = CounterMetricFamily(
            "raftcron_applied_entries",
            "Log entries applied by this process (journal replay "
            "at start excluded), by command and result (accepted or the rejection code).",
            labels=["command", "result"],
        )
        for (command, result), count in sorted(s["entries"].items()):
            entries.add_metric([command, result], count)
        yield entries
        yield _labelled_counter(
            "raftcron_runs_claimed",
            "Slots accounted for, by the status they were claimed with.",
            "status",
            s["claimed"],
        )
        yield _labelled_counter(
            "raftcron_run_outcomes",
            "Attempts ended: succeeded, failed, timed_out, cancelled (final), or retry_scheduled.",
            "outcome",
            s["outcomes"],
        )
        grants = CounterMetricFamily("raftcron_lease_grants", "Leases granted (each a new fencing token).")
        grants.add_metric([], s["grants"])
        yield grants
        yield _labelled_counter(
            "raftcron_lease_refusals",
            "Grants refused: not_queued, backing_off, overlap_queue, resource_busy, resource_rate, job_deleted.",
            "reason",
            s["refusals"],
        )
        expiries = CounterMetricFamily(
            "raftcron_lease_expiries",
            "Leases ended by the reaper: lease_expired "
            "(heartbeats stopped) or timed_out (maximum runtime); then retry or ended.",
            labels=["reason", "then"],
        )
        for (reason, then), count in sorted(s["expiries"].items()):
            expiries.add_metric([reason, then], count)
        yield expiries
        fenced = CounterMetricFamily(
            "raftcron_lease_fenced",
            "Heartbeats, completions and expiries refused because their fencing token is no longer current.",
            labels=["op", "reason"],
        )
        for (op, reason), count in sorted(s["fenced"].items()):
            fenced.add_metric([op, reason], count)
        yield fenced
        buckets, total = s["lateness"]
        yield HistogramMetricFamily(
            "raftcron_fire_lateness_seconds",
            "Scheduled slots claimed to fire: replicated time at the claim (the leader's trigger pass start) minus "
            "the slot's nominal instant. Herd spreading happens after the claim and is not included.",
            buckets=buckets,
            sum_value=total,
        )
        delay = HistogramMetricFamily(
            "raftcron_apply_delay_seconds",
            "This node's clock at apply minus the proposer's issued_at, by command: propose-to-apply latency on "
            "the proposing node (plus planning time for claims, plus clock skew elsewhere).",
            labels=["command"],
        )
        for name, (buckets, total) in sorted(s["apply_delay"].items()):
            delay.add_metric([name], buckets, total)
        yield delay
        recounted = CounterMetricFamily(
            "raftcron_metrics_recounted_runs",
            "Runs recounted at scrape time to keep runs-by-status exact (the cost of these metrics).",
        )
        recounted.add_metric([], s["recounted_runs"])
        yield recounted

    # -- the leader's queue: no state lock held ------------------------------------------
    def _dispatch_families(self) -> Iterator:
        family = GaugeMetricFamily(
            "raftcron_dispatch_queue",
            "The leader's in-memory run queue per target: ready "
            "(due), pending (not yet due) or held (due, its budget full). "
            "Empty on followers.",
            labels=["target", "stage"],
        )
        for (target, stage), count in sorted(dispatcher_queue_depths(self._current_dispatcher()).items()):
            family.add_metric([target, stage], count)
        yield family


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _labelled_counter(name: str, documentation: str, label: str, counts: dict[str, int]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation, labels=[label])
    for key, count in sorted(counts.items()):
        family.add_metric([key], count)
    return family


__all__ = ["ApplyObserver", "RaftcronCollector", "dispatcher_queue_depths", "node_ready"]
