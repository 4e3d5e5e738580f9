"""The history checker: what clients, workers, the fenced sink and the replicas observed,
checked against the invariants of DESIGN.md. Pure: data in, violations out, no I/O.

A scenario records a History and calls `check(history)`; an empty list means every
invariant held. Observation times (`*_at_us`) come from the observer's clock; run and
attempt instants come from replicated time. Checks never compare the two clocks.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

FINAL = frozenset({"succeeded", "failed", "timed_out", "skipped", "missed", "cancelled"})
STATUSES = FINAL | {"queued", "leased"}
NEEDS_REASON = frozenset({"skipped", "missed"})
# Outcomes an attempt can end with: reported by its worker, or decided by the reaper.
ENDED_OUTCOMES = frozenset({"success", "failure", "retry_later", "lease_expired", "timed_out"})


@dataclass(frozen=True)
class Attempt:
    token: int
    outcome: str = ""  # "" while the attempt holds its lease
    started_us: int = 0
    finished_us: int = 0
    worker: str = ""


@dataclass(frozen=True)
class RunObs:
    """One claimed run key as one replica showed it."""

    job_id: str
    scheduled_us: int
    status: str
    claim_index: int
    kind: str = "scheduled"
    reason: str = ""
    token: int = 0
    attempts: tuple[Attempt, ...] = ()
    request: str = ""  # the client request that created it (manual runs), when known

    @property
    def key(self) -> tuple[str, int]:
        return (self.job_id, self.scheduled_us)


@dataclass(frozen=True)
class Grant:
    """A lease as the worker that received it saw it."""

    job_id: str
    scheduled_us: int
    token: int
    worker: str
    at_us: int


@dataclass(frozen=True)
class Answer:
    """The cluster's answer to a heartbeat or completion (outcome ok | fenced | not_found | cancelled)."""

    call: str  # heartbeat | complete
    job_id: str
    scheduled_us: int
    token: int
    outcome: str
    sent_us: int
    kind: str = ""  # completions: success | failure | retry_later


@dataclass(frozen=True)
class SinkWrite:
    """One write offered to the fenced sink, in the sink's order (`seq`)."""

    seq: int
    job_id: str
    scheduled_us: int
    token: int
    accepted: bool
    worker: str = ""


@dataclass(frozen=True)
class AckedWrite:
    """A write the cluster acknowledged: it must be in every replica's final state.

    what="job": the job exists at `version` or later. what="run": the run key exists
    (and, when `request` is set, it is the run that request created).
    """

    what: str
    job_id: str
    scheduled_us: int = 0
    version: int = 0
    request: str = ""


@dataclass(frozen=True)
class Violation:
    check: str
    message: str


@dataclass
class History:
    # Final state, after healing: every replica's runs, job versions and (index, digest).
    replicas: dict[str, list[RunObs]] = field(default_factory=dict)
    jobs: dict[str, dict[str, int]] = field(default_factory=dict)
    digests: dict[str, tuple[int, str]] = field(default_factory=dict)
    expected_replicas: tuple[str, ...] = ()
    # Runs a node showed mid-scenario (e.g. an isolated leader): whatever it applied must survive.
    interim: dict[str, list[RunObs]] = field(default_factory=dict)
    # job_id -> slots that must be accounted for (fired, skipped or missed with a reason).
    due: dict[str, list[int]] = field(default_factory=dict)
    grants: list[Grant] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    sink: list[SinkWrite] = field(default_factory=list)
    # Jobs whose handler writes the sink before it succeeds: every success left an effect.
    sink_jobs: frozenset[str] = frozenset()
    acked: list[AckedWrite] = field(default_factory=list)
    log_alerts: list[str] = field(default_factory=list)
    # Scenario-specific facts (name, held, detail): e.g. "a new leader was elected".
    expectations: list[tuple[str, bool, str]] = field(default_factory=list)
    # node -> (seconds, resident KiB, Raft journal bytes) sampled while the scenario ran.
    resources: dict[str, list[tuple[float, int, int]]] = field(default_factory=dict)


def check(history: History) -> list[Violation]:
    found: list[Violation] = []
    for checker in CHECKS:
        found.extend(checker(history))
    return found


def _key(job_id: str, scheduled_us: int) -> str:
    return f"{job_id}@{scheduled_us}"


def _reference(history: History) -> dict[tuple[str, int], RunObs]:
    """One replica's runs by key (all replicas must agree; the first is checked against the rest)."""
    if not history.replicas:
        return {}
    node = sorted(history.replicas)[0]
    return {run.key: run for run in history.replicas[node]}


def replicas_agree(history: History) -> list[Violation]:
    found = []
    missing = sorted(set(history.expected_replicas) - set(history.digests))
    if missing:
        found.append(Violation("replicas_agree", f"no final digest from {', '.join(missing)}"))
    if len(set(history.digests.values())) > 1:
        shown = ", ".join(f"{n}={i}:{d[:12]}" for n, (i, d) in sorted(history.digests.items()))
        found.append(Violation("replicas_agree", f"replicas differ after heal: {shown}"))
    claimed = {node: {run.key: run.claim_index for run in runs} for node, runs in history.replicas.items()}
    if claimed:
        first = sorted(claimed)[0]
        for node in sorted(claimed)[1:]:
            if claimed[node] != claimed[first]:
                only = sorted(set(claimed[node].items()) ^ set(claimed[first].items()))[:3]
                found.append(Violation("replicas_agree", f"{node} and {first} hold different claims, e.g. {only}"))
    return found


def no_double_claim(history: History) -> list[Violation]:
    found = []
    views = [(f"{node} (final)", runs) for node, runs in history.replicas.items()]
    views += [(f"{node} (mid-scenario)", runs) for node, runs in history.interim.items()]
    for node, runs in sorted(views):
        seen: dict[tuple[str, int], int] = {}
        by_request: dict[str, set[tuple[str, int]]] = defaultdict(set)
        for run in runs:
            if run.key in seen:
                found.append(
                    Violation(
                        "no_double_claim",
                        f"{node}: {_key(*run.key)} claimed twice (entries {seen[run.key]} and {run.claim_index})",
                    )
                )
            seen[run.key] = run.claim_index
            if run.request:
                by_request[run.request].add(run.key)
        for request, keys in sorted(by_request.items()):
            if len(keys) > 1:
                found.append(Violation("no_double_claim", f"{node}: request {request} created {len(keys)} runs"))
    return found


def slots_accounted(history: History) -> list[Violation]:
    found = []
    runs = _reference(history)
    by_job: dict[str, set[int]] = defaultdict(set)
    for run in runs.values():
        if run.kind == "scheduled":
            by_job[run.job_id].add(run.scheduled_us)
        if run.status not in STATUSES:
            found.append(Violation("slots_accounted", f"{_key(*run.key)} has unknown status {run.status!r}"))
        elif run.status in NEEDS_REASON and not run.reason:
            found.append(Violation("slots_accounted", f"{_key(*run.key)} is {run.status} without a reason"))
    for job_id, slots in sorted(history.due.items()):
        lost = sorted(set(slots) - by_job.get(job_id, set()))
        if lost:
            found.append(Violation("slots_accounted", f"{job_id}: {len(lost)} due slots vanished, first {lost[:3]}"))
        if slots:
            low, high, wanted = min(slots), max(slots), set(slots)
            extra = sorted(s for s in by_job.get(job_id, ()) if low <= s <= high and s not in wanted)
            if extra:
                found.append(
                    Violation("slots_accounted", f"{job_id}: runs at instants that are not slots: {extra[:3]}")
                )
    return found


def _attempt_violations(run: RunObs) -> list[str]:
    problems = []
    tokens = [a.token for a in run.attempts]
    if any(b <= a for a, b in zip(tokens, tokens[1:])):
        problems.append(f"tokens do not strictly increase: {tokens}")
    for earlier, later in zip(run.attempts, run.attempts[1:]):
        if earlier.outcome not in ENDED_OUTCOMES:
            problems.append(f"token {later.token} granted while token {earlier.token} had not ended")
        elif later.started_us < earlier.finished_us:
            problems.append(f"token {later.token} started before token {earlier.token} ended")
    successes = [a.token for a in run.attempts if a.outcome == "success"]
    if len(successes) > 1 or (successes and successes[-1] != tokens[-1]):
        problems.append(f"succeeded by {successes}, last token {tokens[-1]}")
    if run.status == "succeeded" and not successes:
        problems.append("succeeded without a successful attempt")
    if run.status == "leased" and (not run.attempts or run.attempts[-1].outcome):
        problems.append("leased without a live attempt")
    if run.attempts and run.token and run.token != tokens[-1]:
        problems.append(f"current token {run.token} is not the last attempt's {tokens[-1]}")
    return problems


def one_lease_at_a_time(history: History) -> list[Violation]:
    found = []
    runs = _reference(history)
    for run in runs.values():
        for problem in _attempt_violations(run):
            found.append(Violation("one_lease_at_a_time", f"{_key(*run.key)}: {problem}"))
    granted: dict[tuple[str, int, int], Grant] = {}
    for grant in history.grants:
        ident = (grant.job_id, grant.scheduled_us, grant.token)
        if ident in granted and granted[ident].worker != grant.worker:
            found.append(
                Violation(
                    "one_lease_at_a_time",
                    f"token {grant.token} of {_key(*ident[:2])} granted to {granted[ident].worker} and {grant.worker}",
                )
            )
        granted[ident] = grant
        run = runs.get((grant.job_id, grant.scheduled_us))
        if run is None or grant.token not in {a.token for a in run.attempts}:
            found.append(
                Violation(
                    "acked_durable",
                    f"lease {grant.token} of {_key(*ident[:2])} was granted but is not in the final state",
                )
            )
    return found


def stale_rejected_by_cluster(history: History) -> list[Violation]:
    """An ok answer for token t sent after a newer token of the same run was granted is a
    second valid lease; an ok completion must be in the final state."""
    found = []
    runs = _reference(history)
    newer: dict[tuple[str, int], list[Grant]] = defaultdict(list)
    for grant in history.grants:
        newer[(grant.job_id, grant.scheduled_us)].append(grant)
    for answer in history.answers:
        if answer.outcome != "ok":
            continue
        key = (answer.job_id, answer.scheduled_us)
        later = [g for g in newer[key] if g.token > answer.token and g.at_us < answer.sent_us]
        if later:
            found.append(
                Violation(
                    "stale_rejected_by_cluster",
                    f"{answer.call} with token {answer.token} of "
                    f"{_key(*key)} accepted after token {later[0].token} was granted",
                )
            )
        if answer.call == "complete":
            run = runs.get(key)
            attempt = next((a for a in run.attempts if a.token == answer.token), None) if run else None
            if attempt is None or attempt.outcome != answer.kind:
                seen = attempt.outcome if attempt else "no such attempt"
                found.append(
                    Violation(
                        "acked_durable",
                        f"completion {answer.kind} of {_key(*key)} token "
                        f"{answer.token} was acknowledged, final state has {seen!r}",
                    )
                )
    return found


def sink_fenced(history: History) -> list[Violation]:
    found = []
    runs = _reference(history)
    highest: dict[tuple[str, int], int] = {}
    effects: dict[tuple[str, int], set[int]] = defaultdict(set)
    for write in sorted(history.sink, key=lambda w: w.seq):
        key = (write.job_id, write.scheduled_us)
        if not write.accepted:
            continue
        if write.token < highest.get(key, 0):
            found.append(
                Violation(
                    "stale_rejected_by_sink",
                    f"sink accepted token {write.token} for {_key(*key)} after token {highest[key]}",
                )
            )
        highest[key] = max(highest.get(key, 0), write.token)
        effects[key].add(write.token)
        run = runs.get(key)
        if run is None:
            # The worker was granted the run, so its claim had committed: a lost write, not a stale one.
            found.append(
                Violation(
                    "acked_durable",
                    f"sink accepted token {write.token} for {_key(*key)}, "
                    "a run the final state does not hold (its claim was lost)",
                )
            )
        elif write.token not in {a.token for a in run.attempts}:
            found.append(
                Violation(
                    "stale_rejected_by_sink",
                    f"sink accepted token {write.token} for {_key(*key)}, which the cluster never granted",
                )
            )
    for run in runs.values():
        if run.job_id in history.sink_jobs and run.status == "succeeded":
            success = next(a.token for a in run.attempts if a.outcome == "success")
            if success not in effects[run.key]:
                found.append(
                    Violation(
                        "at_least_once",
                        f"{_key(*run.key)} succeeded with token {success} but the sink holds no write of it",
                    )
                )
    return found


def acked_durable(history: History) -> list[Violation]:
    found = []
    for node in sorted(history.replicas):
        runs = {run.key: run for run in history.replicas[node]}
        jobs = history.jobs.get(node, {})
        for write in history.acked:
            if write.what == "job":
                version = jobs.get(write.job_id)
                if version is None or version < write.version:
                    found.append(
                        Violation(
                            "acked_durable",
                            f"{node}: acknowledged job {write.job_id} v{write.version} lost (final: {version})",
                        )
                    )
            elif write.what == "run":
                run = runs.get((write.job_id, write.scheduled_us))
                if run is None:
                    found.append(
                        Violation(
                            "acked_durable", f"{node}: acknowledged run {_key(write.job_id, write.scheduled_us)} lost"
                        )
                    )
                elif write.request and run.request != write.request:
                    found.append(
                        Violation(
                            "acked_durable",
                            f"{node}: run {_key(*run.key)} was acknowledged to "
                            f"{write.request}, final state says {run.request!r}",
                        )
                    )
    return found


def interim_survives(history: History) -> list[Violation]:
    """A node applies only committed entries: every claim it ever showed is in the final log."""
    found = []
    final = {run.key: run.claim_index for run in _reference(history).values()}
    for node, runs in sorted(history.interim.items()):
        for run in runs:
            if final.get(run.key) != run.claim_index:
                found.append(
                    Violation(
                        "interim_survives",
                        f"{node} showed {_key(*run.key)} claimed at entry "
                        f"{run.claim_index}; final state: {final.get(run.key)}",
                    )
                )
    return found


def clean_logs(history: History) -> list[Violation]:
    return [Violation("clean_logs", line) for line in history.log_alerts]


# A chaos cluster holds a few dozen jobs and a few thousand runs: about 60 MiB per node idle.
MAX_RSS_KIB = 512 * 1024
# Raft log between compactions (the journal file's high-water mark).
MAX_JOURNAL_BYTES = 256 << 20
# Runs at least this long must also show no growth trend (a leak) after warming up.
TREND_MIN_S = 240.0
TREND_SLACK_KIB = 32 * 1024


def memory_and_log_bounded(history: History) -> list[Violation]:
    """Every node stayed under fixed memory and journal ceilings; a long run does not keep growing."""
    found = []
    for node in history.expected_replicas:
        samples = history.resources.get(node, [])
        if not samples:
            found.append(Violation("memory_and_log_bounded", f"{node}: never sampled"))
            continue
        at_s, rss, journal = max(samples, key=lambda sample: sample[1])
        if rss > MAX_RSS_KIB:
            found.append(
                Violation(
                    "memory_and_log_bounded",
                    f"{node}: {rss // 1024} MiB resident at {at_s:.0f}s (ceiling {MAX_RSS_KIB // 1024} MiB)",
                )
            )
        journal = max(sample[2] for sample in samples)
        if journal > MAX_JOURNAL_BYTES:
            found.append(
                Violation(
                    "memory_and_log_bounded",
                    f"{node}: Raft journal {journal >> 20} MiB (ceiling {MAX_JOURNAL_BYTES >> 20} MiB)",
                )
            )
        first_s, span_s = samples[0][0], samples[-1][0] - samples[0][0]
        if span_s >= TREND_MIN_S:
            # After the first quarter (warm-up), the last quarter's peak may not outgrow the second's.
            second = [s[1] for s in samples if first_s + span_s / 4 <= s[0] < first_s + span_s / 2]
            last = [s[1] for s in samples if s[0] >= first_s + 3 * span_s / 4]
            if second and last and max(last) > 1.25 * max(second) + TREND_SLACK_KIB:
                found.append(
                    Violation(
                        "memory_and_log_bounded",
                        f"{node}: resident memory grew from "
                        f"{max(second) // 1024} MiB to {max(last) // 1024} MiB over {span_s:.0f}s",
                    )
                )
    return found


def expectations(history: History) -> list[Violation]:
    return [Violation("scenario", f"{name}: {detail}") for name, held, detail in history.expectations if not held]


CHECKS = (
    replicas_agree,
    no_double_claim,
    slots_accounted,
    one_lease_at_a_time,
    stale_rejected_by_cluster,
    sink_fenced,
    acked_durable,
    interim_survives,
    clean_logs,
    memory_and_log_bounded,
    expectations,
)
