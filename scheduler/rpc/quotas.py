"""Quotas per owner and a write rate per principal, admitted in the servicer.

Two kinds of limit, both refused with RESOURCE_EXHAUSTED and a message that names the owner or
principal, what it has and the limit:

- **Quotas per owner**, against this replica's state: jobs, live (queued or leased) runs, runs
  per backfill call. `quota_problems` is the policy, pure: tests call it with a view and an ask.
  The view is read before the write is proposed, so two writes racing on different nodes (or
  threads) may both pass and overshoot a quota by one write's worth; the core does not know
  quotas (they are node config, not replicated state).
- **Rates**, in each node's memory (token buckets, `TokenBucket`, clock injected): writes per
  principal, backfilled runs and manual triggers per owner per window. A caller spreading its
  calls over N nodes gets up to N times the rate.

Only submitters are held to quotas; the rate applies to submitters and admins. Workers' calls
(Lease, Heartbeat, Complete) are not JobService writes and never pass here: the execution path
is not rate-limited. A node without principals (loopback, insecure_grpc) has no principal to
count, so nothing is limited there (benchmarks and tests run that way).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import grpc

from scheduler.core.commands import ApplyJobs
from scheduler.security.interceptor import current_principal
from scheduler.security.principals import ADMIN, SUBMITTER, Principal

# Trailing metadata of a rate refusal: seconds after which the same call would be admitted.
RETRY_AFTER_KEY = "raftcron-retry-after-s"
# Jobs looked at per hold of the state lock while an owner's usage is counted.
USAGE_CHUNK = 2_000
# Fields an owner override may set (the rate is per principal, not per owner).
OWNER_FIELDS = (
    "max_jobs_per_owner",
    "max_live_runs_per_owner",
    "max_backfill_runs_per_call",
    "max_backfill_runs_per_window",
    "max_triggers_per_window",
)
PRINCIPAL_FIELDS = ("writes_per_s", "write_burst")


@dataclass(frozen=True)
class QuotaLimits:
    """Node config `quotas:`; `owners: {finance: {max_jobs_per_owner: 50000}}` overrides per
    owner, `principals: {ci: {writes_per_s: 100}}` the write rate per principal."""

    max_jobs_per_owner: int = 10_000
    max_live_runs_per_owner: int = 10_000
    max_backfill_runs_per_call: int = 1_000
    max_backfill_runs_per_window: int = 10_000
    max_triggers_per_window: int = 600
    window_s: float = 3600.0
    # Writes (JobService changes) per principal per node: a sustained rate and a burst.
    writes_per_s: float = 20.0
    write_burst: int = 100
    owners: Mapping[str, Mapping[str, int]] = field(default_factory=dict, hash=False)
    # principal name -> {writes_per_s, write_burst}: a busy CI principal may get more.
    principals: Mapping[str, Mapping[str, float]] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        counts = (
            "max_jobs_per_owner",
            "max_live_runs_per_owner",
            "max_backfill_runs_per_call",
            "max_backfill_runs_per_window",
            "max_triggers_per_window",
            "write_burst",
        )
        for name in counts:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"quotas.{name} must be a whole number >= 0, got {value!r}")
        for name in ("window_s", "writes_per_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise ValueError(f"quotas.{name} must be a positive number, got {value!r}")
        for owner, overrides in self.owners.items():
            if not isinstance(overrides, Mapping) or set(overrides) - set(OWNER_FIELDS):
                raise ValueError(f"quotas.owners.{owner}: takes {', '.join(OWNER_FIELDS)}")
        for name, overrides in self.principals.items():
            if not isinstance(overrides, Mapping) or set(overrides) - set(PRINCIPAL_FIELDS):
                raise ValueError(f"quotas.principals.{name}: takes {', '.join(PRINCIPAL_FIELDS)}")
            dataclasses.replace(self, owners={}, principals={}, **overrides)  # the same checks

    def for_owner(self, owner: str) -> QuotaLimits:
        overrides = self.owners.get(owner)
        return dataclasses.replace(self, owners={}, principals={}, **overrides) if overrides else self

    def for_principal(self, name: str) -> QuotaLimits:
        overrides = self.principals.get(name)
        return dataclasses.replace(self, owners={}, principals={}, **overrides) if overrides else self


@dataclass(frozen=True)
class OwnerUsage:
    jobs: int = 0
    live_runs: int = 0


@dataclass(frozen=True)
class QuotaAsk:
    """What one write would add to an owner: jobs (net), live runs, runs in one backfill call."""

    owner: str
    new_jobs: int = 0
    new_live_runs: int = 0
    backfill_runs: int = 0


def quota_problems(usage: OwnerUsage, ask: QuotaAsk, limits: QuotaLimits) -> list[str]:
    """Why `ask` must be refused for an owner using `usage`; empty when it fits. A write that
    does not grow a count is never refused for it (a lowered limit does not block cleanups)."""
    limits = limits.for_owner(ask.owner)
    problems = []
    if ask.new_jobs > 0 and usage.jobs + ask.new_jobs > limits.max_jobs_per_owner:
        problems.append(
            f"owner {ask.owner!r} has {usage.jobs} jobs and this adds {ask.new_jobs}; "
            f"the limit is {limits.max_jobs_per_owner}"
        )
    if ask.backfill_runs > limits.max_backfill_runs_per_call:
        problems.append(
            f"a backfill of {ask.backfill_runs} runs for owner {ask.owner!r}; the limit per call is "
            f"{limits.max_backfill_runs_per_call} (ask for fewer with max_runs, or a shorter range)"
        )
    if ask.new_live_runs > 0 and usage.live_runs + ask.new_live_runs > limits.max_live_runs_per_owner:
        problems.append(
            f"owner {ask.owner!r} has {usage.live_runs} queued or leased runs and this adds "
            f"{ask.new_live_runs}; the limit is {limits.max_live_runs_per_owner}"
        )
    return problems


class TokenBucket:
    """`capacity` tokens, refilled at `rate_per_s`; time comes from the caller (pure)."""

    def __init__(self, capacity: float, rate_per_s: float, now_s: float) -> None:
        self.capacity = capacity
        self.rate_per_s = rate_per_s
        self._tokens = float(capacity)
        self._at_s = now_s

    def full(self, now_s: float) -> bool:
        return self._tokens + max(0.0, now_s - self._at_s) * self.rate_per_s >= self.capacity

    def take(self, amount: float, now_s: float) -> float:
        """Take `amount` tokens and return 0.0, or take nothing and return the seconds until
        they would be there (infinity: more than the bucket ever holds)."""
        self._tokens = min(self.capacity, self._tokens + max(0.0, now_s - self._at_s) * self.rate_per_s)
        self._at_s = max(self._at_s, now_s)
        if amount <= self._tokens:
            self._tokens -= amount
            return 0.0
        if amount > self.capacity:
            return math.inf
        return (amount - self._tokens) / self.rate_per_s


class Buckets:
    """A TokenBucket per key, made on first use; thread-safe. Full buckets are dropped now and
    then, so callers that come and go leave nothing behind."""

    def __init__(self, clock_s: Callable[[], float] = time.monotonic) -> None:
        self._clock_s = clock_s
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def take(self, key: tuple[str, str], amount: float, capacity: float, rate_per_s: float) -> float:
        now_s = self._clock_s()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None or (bucket.capacity, bucket.rate_per_s) != (capacity, rate_per_s):
                if len(self._buckets) >= 10_000:
                    self._forget_full(now_s)
                bucket = self._buckets[key] = TokenBucket(capacity, rate_per_s, now_s)
            return bucket.take(amount, now_s)

    def _forget_full(self, now_s: float) -> None:
        for key, bucket in list(self._buckets.items()):
            if bucket.full(now_s):
                del self._buckets[key]


def owner_usage(read, owners: Iterable[str]) -> dict[str, OwnerUsage]:
    """Jobs and live runs of each owner in this replica's state, counted USAGE_CHUNK jobs per
    hold of the state lock (applies go on in between, so the counts are a moment's estimate)."""
    wanted = set(owners)
    jobs = dict.fromkeys(wanted, 0)
    live = dict.fromkeys(wanted, 0)
    with read() as state:
        job_ids = list(state.jobs)
    for first in range(0, len(job_ids), USAGE_CHUNK):
        with read() as state:
            for job_id in job_ids[first : first + USAGE_CHUNK]:
                job = state.jobs.get(job_id)
                if job is None or job.body.owner not in wanted:
                    continue
                jobs[job.body.owner] += 1
                live[job.body.owner] += len(state.live_runs.get(job_id, ()))
    return {owner: OwnerUsage(jobs[owner], live[owner]) for owner in wanted}


def apply_job_deltas(state, command: ApplyJobs) -> dict[str, int]:
    """owner -> how many more jobs it has once `command` applies (negative: fewer)."""
    deltas: dict[str, int] = {}
    for upsert in command.upserts:
        current = state.jobs.get(upsert.spec.id)
        if current is not None:
            deltas[current.body.owner] = deltas.get(current.body.owner, 0) - 1
        deltas[upsert.spec.owner] = deltas.get(upsert.spec.owner, 0) + 1
    for job_id in command.removals:
        current = state.jobs.get(job_id)
        if current is not None:
            deltas[current.body.owner] = deltas.get(current.body.owner, 0) - 1
    return deltas


def _held_to_quotas(principal: Principal | None) -> bool:
    return principal is not None and principal.role == SUBMITTER


def _rate_limited(principal: Principal | None) -> bool:
    return principal is not None and principal.role in (SUBMITTER, ADMIN)


class Admission:
    """What JobService writes pass before they are proposed (see the module docstring)."""

    def __init__(self, read, limits: QuotaLimits = QuotaLimits(), clock_s: Callable[[], float] = time.monotonic):
        self._read = read
        self.limits = limits
        self._buckets = Buckets(clock_s)

    def admit_write(self, context: grpc.ServicerContext) -> None:
        principal = current_principal()
        if not _rate_limited(principal):
            return
        limits = self.limits.for_principal(principal.name)
        wait_s = self._buckets.take(("writes", principal.name), 1, limits.write_burst, limits.writes_per_s)
        if wait_s:
            _refuse_rate(
                context,
                wait_s,
                f"principal {principal.name!r} is over its write rate "
                f"({limits.writes_per_s:g}/s, bursts of {limits.write_burst})",
            )

    def check_apply(self, context: grpc.ServicerContext, command: ApplyJobs) -> None:
        if not _held_to_quotas(current_principal()):
            return
        with self._read() as state:
            deltas = {owner: delta for owner, delta in apply_job_deltas(state, command).items() if delta > 0}
        if not deltas:
            return
        usage = owner_usage(self._read, deltas)
        problems = [
            p
            for owner, delta in sorted(deltas.items())
            for p in quota_problems(usage[owner], QuotaAsk(owner, new_jobs=delta), self.limits)
        ]
        _refuse_problems(context, problems)

    def check_trigger(self, context: grpc.ServicerContext, job_id: str) -> None:
        """A manual run of `job_id` (an unknown job is left to the core: NOT_FOUND)."""
        if not _held_to_quotas(current_principal()):
            return
        with self._read() as state:
            job = state.jobs.get(job_id)
            owner = job.body.owner if job is not None else None
        if owner is None:
            return
        usage = owner_usage(self._read, (owner,))[owner]
        _refuse_problems(context, quota_problems(usage, QuotaAsk(owner, new_live_runs=1), self.limits))
        self._take_window(context, "triggers", owner, 1, self.limits.for_owner(owner).max_triggers_per_window)

    def backfill_cap(self, owner: str, asked: int) -> int:
        """How many fires a backfill should compute: one more than the per-call quota shows
        that the range is over it, without computing all of them."""
        if not _held_to_quotas(current_principal()):
            return asked
        return min(asked, self.limits.for_owner(owner).max_backfill_runs_per_call + 1)

    def check_backfill(self, context: grpc.ServicerContext, owner: str, runs: int) -> None:
        if not _held_to_quotas(current_principal()):
            return
        usage = owner_usage(self._read, (owner,))[owner]
        ask = QuotaAsk(owner, new_live_runs=runs, backfill_runs=runs)
        _refuse_problems(context, quota_problems(usage, ask, self.limits))
        self._take_window(
            context, "backfill runs", owner, runs, self.limits.for_owner(owner).max_backfill_runs_per_window
        )

    def _take_window(self, context, what: str, owner: str, amount: int, per_window: int) -> None:
        window_s = self.limits.window_s
        wait_s = self._buckets.take((what, owner), amount, per_window, per_window / window_s if per_window else 1.0)
        if wait_s:
            _refuse_rate(
                context,
                wait_s,
                f"owner {owner!r} asked for {amount} {what}; the limit is {per_window} per {window_s:g} s",
            )


def _refuse_problems(context: grpc.ServicerContext, problems: list[str]) -> None:
    if problems:
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "quota exceeded: " + "; ".join(problems))


def _refuse_rate(context: grpc.ServicerContext, wait_s: float, reason: str) -> None:
    if math.isinf(wait_s):
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"rate limited: {reason}; never admitted in one call")
    context.set_trailing_metadata(((RETRY_AFTER_KEY, f"{wait_s:.3f}"),))
    context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"rate limited: {reason}; retry in {wait_s:.2f} s")
