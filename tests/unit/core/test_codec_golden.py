"""Golden files pin the log and snapshot formats: old entries must stay readable.

`golden/commands_v1.txt` holds one representative entry per command shape as hex;
`golden/snapshot_v2.txt` holds a small snapshot (the `snapshot_v1*` files, an older format, stay
readable); `golden/snapshot_v3.txt` the same state once the cluster version is 2 (format 3 is
written only then, so a cluster that has not raised its version keeps writing format 2);
`golden/snapshot_log_format_3.txt` a state holding the fields of log format 3 (several schedules,
intervals, one-shots, windows, run limits). The tests check both ways: the committed bytes decode to the objects built below (old
logs stay readable), and encoding those objects today gives the same bytes (the format did not
drift).

Regenerate with RAFTCRON_REGEN_GOLDEN=1 only to ADD lines (a new command, or an entry using a
new field). A field added to a replicated struct is `T | UnsetType = UNSET` (log_format.py), so
the existing lines keep their bytes: if a regeneration changes an existing line, an older node
could no longer read what this version writes, and a rolling upgrade would halt it. A file whose
content changes is first archived next to it as `<name>.<sha8>.txt`, and archived files keep
being decoded, so every format ever committed stays tested. An incompatible change needs a new
format version byte instead.
"""

from __future__ import annotations

import hashlib
import os
import typing
from pathlib import Path

import msgspec
import pytest

from scheduler.core import CodecError, apply, decode_command, decode_snapshot, encode_command, encode_snapshot
from scheduler.core.codec import (
    CALENDARS_SNAPSHOT_FORMAT_VERSION,
    COMMAND_FORMAT_VERSION,
    SNAPSHOT_FORMAT_VERSION,
    SNAPSHOT_MAGIC,
    VERSIONED_SNAPSHOT_FORMAT_VERSION,
    NewerLogFormat,
)
from scheduler.core.commands import (
    AddMember,
    AdvanceTime,
    ApplyJobs,
    BackfillRuns,
    CancelRun,
    ClaimLeadership,
    ClaimRuns,
    Command,
    CompleteRuns,
    Completion,
    ExpireLeases,
    Expiry,
    ExtendLeases,
    GrantLeases,
    JobUpsert,
    KillClass,
    LeaseRef,
    MarkAlertsDelivered,
    Member,
    ReadBarrier,
    RemoveMember,
    ReviveClass,
    RunRef,
    SetClusterVersion,
    SetJobPaused,
    SlotClaim,
    TriggerRun,
)
from scheduler.core.model import (
    LIVE_STATUSES,
    ActiveWindow,
    AlertRoute,
    Attempt,
    Calendar,
    CalendarRule,
    HolidaySource,
    HttpTarget,
    Job,
    JobSpec,
    MisfirePolicy,
    RetryPolicy,
    Run,
)
from scheduler.core.results import JobAdded, Rejection, Result
from scheduler.core.state import State

GOLDEN = Path(__file__).parent / "golden"
COMMANDS_FILE = GOLDEN / "commands_v1.txt"
SNAPSHOT_FILE = GOLDEN / f"snapshot_v{SNAPSHOT_FORMAT_VERSION}.txt"
VERSIONED_SNAPSHOT_FILE = GOLDEN / f"snapshot_v{VERSIONED_SNAPSHOT_FORMAT_VERSION}.txt"
FORMAT_3_SNAPSHOT_FILE = GOLDEN / "snapshot_log_format_3.txt"
CALENDARS_SNAPSHOT_FILE = GOLDEN / f"snapshot_v{CALENDARS_SNAPSHOT_FORMAT_VERSION}.txt"
# Snapshot format byte -> the cluster version golden_state() is built with for it.
CLUSTER_VERSION_OF_FORMAT = {1: 1, 2: 1, VERSIONED_SNAPSHOT_FORMAT_VERSION: 2, CALENDARS_SNAPSHOT_FORMAT_VERSION: 3}
REGENERATE = os.environ.get("RAFTCRON_REGEN_GOLDEN") == "1"

T = 1_700_000_000_000_000  # 2023-11-14T22:13:20Z in microseconds

FULL_SPEC = JobSpec(
    id="nightly-backup",
    schedule="30 2 * * *",
    target_kind="shell",
    target="/usr/local/bin/backup --all",
    timezone="Europe/Paris",
    owner="ops@example.com",
    job_class="batch",
    timeout_us=7_200_000_000,
    retry=RetryPolicy(
        max_attempts=5,
        backoff_initial_us=5_000_000,
        backoff_max_us=600_000_000,
        backoff_multiplier=1.5,
        within_us=3_600_000_000,
    ),
    priority=-3,
    payload_json='{"dest":"s3://bucket/été"}',
    misfire=MisfirePolicy(policy="catch_up", grace_us=120_000_000, max_catch_up=4),
    dst_gap="skip",
    dst_repeat="both",
    jitter="pinned",
    overlap="forbid",
    paused=True,
)
MINIMAL_SPEC = JobSpec(id="hello", schedule="*/5 * * * *", target_kind="handler", target="examples.hello")
# Log format 3: the other ways to fire, and the limits.
MULTI_SPEC = JobSpec(
    id="standup",
    schedule="",
    target_kind="handler",
    target="examples.hello",
    timezone="Europe/Paris",
    schedules=("0 9 * * 1-5", "0 11 * * 6"),
    active=ActiveWindow(from_us=T, until_us=T + 86_400_000_000 * 90),
    max_runs=40,
)
INTERVAL_SPEC = JobSpec(
    id="poll", schedule="", target_kind="handler", target="examples.hello", every_us=90_000_000, anchor_us=T
)
ONE_SHOT_SPEC = JobSpec(id="migrate", schedule="", target_kind="shell", target="./migrate.sh", at_us=T + 3_600_000_000)
MANUAL_SPEC = JobSpec(id="rebuild-index", schedule="", target_kind="handler", target="examples.hello")
US_HOLIDAYS = Calendar(
    name="us-holidays",
    dates=("2027-07-05", "2027-09-06"),
    source=HolidaySource(country="US", subdivision="NY", first_year=2027, years=1, library_version="0.109"),
)
CLOSURES = Calendar(name="closures", dates=("2027-12-24",))
CALENDAR_SPEC = JobSpec(
    id="payroll",
    schedule="0 9 * * 1",
    target_kind="handler",
    target="payroll.run",
    timezone="America/New_York",
    calendar=CalendarRule(skip=("us-holidays", "closures"), only=("closures",), on_skip="previous_business_day"),
)
HTTP_SPEC = JobSpec(
    id="hooks.ping",
    schedule="*/5 * * * *",
    target_kind="http",
    target="https://hooks.example.com/ping?team=ops",
    owner="ops",
    http=HttpTarget(
        url="https://hooks.example.com/ping?team=ops",
        method="POST",
        headers=(("X-Team", "ops"),),
        body="ping",
        timeout_us=10_000_000,
        success_codes=(200, 202),
        follow_redirects=True,
    ),
)

# name -> command; names are stable keys into the golden file. Add, never rename.
COMMANDS: dict[str, Command] = {
    "claim_leadership": ClaimLeadership(issued_at_us=T, node_id="10.0.0.1:7000", term=7),
    "claim_leadership_zero": ClaimLeadership(issued_at_us=0, node_id="", term=0),
    "apply_jobs_full": ApplyJobs(
        issued_at_us=T + 1,
        author="alice",
        request_id="0b4f6c1e-3d2a-4c9b-8f00-1234567890ab",
        upserts=(
            JobUpsert(spec=FULL_SPEC, expected_version=3, next_due_us=T + 3_600_000_000),
            JobUpsert(spec=MINIMAL_SPEC, expected_version=0, next_due_us=0),
        ),
        removals=("old-report", "tmp"),
    ),
    "apply_jobs_defaults": ApplyJobs(issued_at_us=T + 2, author="", request_id=""),
    "set_job_paused": SetJobPaused(
        issued_at_us=T + 3, job_id="hello", paused=True, author="bob", reason="upstream outage", request_id="req-7"
    ),
    "set_job_resumed": SetJobPaused(
        issued_at_us=T + 4, job_id="hello", paused=False, author="bob", reason="", request_id=""
    ),
    "claim_runs": ClaimRuns(
        issued_at_us=T + 5,
        epoch=12,
        claims=(
            SlotClaim("hello", T, T + 300_000_000, 1),
            SlotClaim("hello", T + 300_000_000, T + 600_000_000, 1, "queued", "", T + 300_000_000 + 42_000_000),
            SlotClaim(
                "nightly-backup", T - 86_400_000_000, T, 4, "missed", "found 86400s late; the scheduler was not firing"
            ),
            SlotClaim("nightly-backup", T, 0, 4, "skipped", "paused"),
        ),
    ),
    "claim_runs_empty": ClaimRuns(issued_at_us=T + 6, epoch=0, claims=()),
    "read_barrier": ReadBarrier(issued_at_us=T + 7),
    "grant_leases": GrantLeases(
        issued_at_us=T + 8,
        epoch=12,
        worker_id="worker-1",
        lease_ttl_us=30_000_000,
        grants=(RunRef("hello", T), RunRef("nightly-backup", T)),
    ),
    "extend_leases": ExtendLeases(
        issued_at_us=T + 9, leases=(LeaseRef("hello", T, 44), LeaseRef("hello", T + 300_000_000, 45))
    ),
    "complete_runs": CompleteRuns(
        issued_at_us=T + 10,
        completions=(
            Completion(LeaseRef("hello", T, 44), "worker-1", "success", output_tail="done\n"),
            Completion(
                LeaseRef("nightly-backup", T, 46),
                "worker-2",
                "failure",
                exit_code=3,
                error="disk full",
                output_tail="…last lines",
                retry_after_us=5_000_000,
                jitter_ppm=123_456,
            ),
            Completion(LeaseRef("hello", T + 300_000_000, 45), "worker-1", "retry_later"),
        ),
    ),
    "expire_leases": ExpireLeases(
        issued_at_us=T + 11,
        epoch=12,
        expiries=(
            Expiry(LeaseRef("hello", T, 44), "lease_expired", 999_999),
            Expiry(LeaseRef("hello", T + 1, 47), "timed_out"),
        ),
    ),
    "negative_and_large_ints": ClaimLeadership(issued_at_us=-1, node_id="n", term=2**63 - 1),
    "advance_time": AdvanceTime(issued_at_us=T + 14, epoch=12, monotonic_us=987_654_321),
    "kill_class": KillClass(
        T + 15, "reports", "db migration", "carol", "req-5", until_us=T + 3_600_000_000, cancel_running=True
    ),
    "revive_class": ReviveClass(T + 16, "reports", "carol", "req-6"),
    "mark_alerts_delivered": MarkAlertsDelivered(T + 17, 12, ("failed:hello@1", "missed:hello@2"), monotonic_us=5),
    "trigger_run": TriggerRun(issued_at_us=T + 12, job_id="hello", author="alice", request_id="req-3"),
    "backfill_runs": BackfillRuns(
        issued_at_us=T + 13,
        job_id="hello",
        author="bob",
        request_id="req-4",
        slots=(T - 120_000_000, T - 60_000_000),
        interval_us=1_000_000,
    ),
    "add_member": AddMember(
        T + 18,
        Member("n4", "10.0.0.4:7100", "10.0.0.4:7200"),
        "alice",
        "req-8",
        known_members=(Member("n1", "10.0.0.1:7100", "10.0.0.1:7200"), Member("n2", "[::1]:7100", "[::1]:7200")),
    ),
    "remove_member": RemoveMember(T + 19, "n2", "alice", "req-9"),
    "set_cluster_version": SetClusterVersion(T + 20, version=2, epoch=12, monotonic_us=6),
    # Log format 3.
    "cancel_run": CancelRun(T + 21, "hello", T, "alice", "bad input file", "req-10"),
    "trigger_run_overrides": TriggerRun(
        T + 23, "hello", "alice", "req-11", payload_json='{"day":"tuesday"}', overlap="allow"
    ),
    "backfill_runs_overrides": BackfillRuns(
        T + 24, "hello", "bob", "req-12", (T - 60_000_000,), 0, '{"a":1}', "forbid"
    ),
    "complete_runs_final": CompleteRuns(
        T + 25, (Completion(LeaseRef("hello", T, 44), "w1", "failure", error="account closed", final=True),)
    ),
    "mark_alerts_delivered_counts": MarkAlertsDelivered(
        T + 22, 12, ("missed:hello@1", "recovered:hello@2"), monotonic_us=7, counts=(86_400, 2)
    ),
    "apply_jobs_ways_to_fire": ApplyJobs(
        issued_at_us=T + 21,
        author="alice",
        request_id="req-10",
        upserts=(
            JobUpsert(spec=MULTI_SPEC, expected_version=0, next_due_us=T + 600_000_000),
            JobUpsert(spec=INTERVAL_SPEC, expected_version=0, next_due_us=T + 90_000_000),
            JobUpsert(spec=ONE_SHOT_SPEC, expected_version=0, next_due_us=T + 3_600_000_000),
            JobUpsert(spec=MANUAL_SPEC, expected_version=0, next_due_us=0),
        ),
    ),
    "claim_runs_schedule_indexes": ClaimRuns(
        issued_at_us=T + 22,
        epoch=12,
        claims=(SlotClaim("standup", T, T + 7_200_000_000, 1), SlotClaim("poll", T, T + 90_000_000, 1)),
        schedule_indexes=(1, -1),
    ),
    "apply_jobs_calendars": ApplyJobs(
        issued_at_us=T + 21,
        author="alice",
        request_id="req-10",
        upserts=(JobUpsert(spec=CALENDAR_SPEC, expected_version=0, next_due_us=T + 86_400_000_000),),
        calendars=(US_HOLIDAYS, CLOSURES),
        calendar_removals=("old-closures",),
    ),
    "claim_runs_calendar": ClaimRuns(
        issued_at_us=T + 22,
        epoch=12,
        claims=(
            SlotClaim("payroll", T, T + 604_800_000_000, 1, "skipped", "calendar us-holidays: 2023-11-14 is listed"),
            SlotClaim("payroll", T + 604_800_000_000, 0, 1, "queued", "moved", T + 345_600_000_000),
        ),
        calendar_keys=(RunRef("payroll", T), RunRef("payroll", T + 604_800_000_000)),
    ),
    "complete_runs_output": CompleteRuns(
        T + 26,
        (
            Completion(
                LeaseRef("hello", T, 44),
                "w1",
                "failure",
                exit_code=1,
                error="exit code 1",
                output_tail="out\nerr\n",
                stdout_tail="out\n",
                stderr_tail="err\n",
            ),
            Completion(LeaseRef("poll", T, 45), "w1", "failure", error="KeyError: 'x'", exception_type="KeyError"),
            Completion(LeaseRef("ping", T, 46), "w1", "success", stdout_tail="pong", http_status=204),
        ),
    ),
    "apply_jobs_http": ApplyJobs(
        issued_at_us=T + 26,
        author="alice",
        request_id="req-13",
        upserts=(JobUpsert(spec=HTTP_SPEC, expected_version=0, next_due_us=T + 300_000_000),),
    ),
    "apply_jobs_after": ApplyJobs(
        issued_at_us=T + 26,
        author="alice",
        request_id="req-13",
        upserts=(
            JobUpsert(
                spec=JobSpec(id="load", schedule="", target_kind="shell", target="./load.sh", after=("extract",)),
                expected_version=0,
                next_due_us=0,
            ),
        ),
    ),
    "apply_jobs_deadline": ApplyJobs(
        issued_at_us=T + 23,
        author="alice",
        request_id="req-11",
        upserts=(
            JobUpsert(
                spec=JobSpec(
                    id="report",
                    schedule="0 6 * * *",
                    target_kind="handler",
                    target="jobs.report",
                    deadline_us=1_800_000_000,
                ),
                expected_version=0,
                next_due_us=T + 86_400_000_000,
            ),
        ),
    ),
    "apply_jobs_routes": ApplyJobs(
        issued_at_us=T + 24,
        author="root",
        request_id="req-12",
        routes=(
            AlertRoute("payments", "https://hooks.example/T0/B0", match="payments", template="slack"),
            AlertRoute("everyone", "http://alerts.example/in", timeout_us=2_000_000, backoff_max_us=60_000_000),
        ),
        route_removals=("old",),
    ),
}
# Commands of log format 3: a node that reads up to format 2 refuses them.
FORMAT_3_COMMANDS = (
    "apply_jobs_routes",
    "apply_jobs_deadline",
    "cancel_run",
    "trigger_run_overrides",
    "backfill_runs_overrides",
    "complete_runs_final",
    "mark_alerts_delivered_counts",
    "apply_jobs_ways_to_fire",
    "claim_runs_schedule_indexes",
    "apply_jobs_calendars",
    "claim_runs_calendar",
    "complete_runs_output",
    "apply_jobs_http",
    "apply_jobs_after",
)


def golden_state(cluster_version: int = 1) -> State:
    """A small state touching every record type; built literally, not by applying commands."""
    hello = Job.of(
        MINIMAL_SPEC,
        version=2,
        author="alice",
        updated_us=T + 10,
        cursor_us=T + 300_000_000,
        next_due_us=T + 600_000_000,
        last_status="succeeded",
        last_scheduled_us=T + 300_000_000,
    )
    backup = Job.of(
        FULL_SPEC,
        version=4,
        author="bob",
        updated_us=T + 11,
        cursor_us=T,
        next_due_us=T + 86_400_000_000,
        paused=True,
        paused_by="bob",
        paused_reason="upstream outage",
        last_status="skipped",
        last_scheduled_us=T,
    )
    finished = Run(
        job_id="hello",
        scheduled_us=T,
        status="succeeded",
        effective_us=T + 1_000,
        claimed_us=T + 5,
        claim_index=40,
        spec_version=2,
        attempt=2,
        fencing_token=44,
        worker_id="worker-1",
        started_us=T + 2_000,
        finished_us=T + 9_000,
        attempts=(
            Attempt(
                number=1,
                worker_id="worker-0",
                fencing_token=41,
                started_us=T + 1_500,
                finished_us=T + 1_700,
                outcome="failure",
                error="exit 3",
                exit_code=3,
            ),
            Attempt(
                number=2,
                worker_id="worker-1",
                fencing_token=44,
                started_us=T + 2_000,
                finished_us=T + 9_000,
                outcome="success",
            ),
        ),
    )
    retrying = Run(
        job_id="hello",
        scheduled_us=T + 300_000_000,
        status="queued",
        reason="exit 1",
        claimed_us=T + 300_000_100,
        claim_index=45,
        spec_version=2,
        effective_us=T + 300_000_000,
        attempt=1,
        fencing_token=46,
        error="exit 1",
        exit_code=1,
        attempts=(
            Attempt(
                number=1,
                worker_id="worker-1",
                fencing_token=46,
                started_us=T + 300_001_000,
                finished_us=T + 300_002_000,
                outcome="failure",
                error="exit 1",
                exit_code=1,
            ),
        ),
        not_before_us=T + 310_000_000,
        lease_ttl_us=30_000_000,
        output_tail="Traceback ...",
    )
    leased = Run(
        job_id="hello",
        scheduled_us=T + 600_000_000,
        status="leased",
        claimed_us=T + 600_000_100,
        claim_index=47,
        spec_version=2,
        effective_us=T + 600_000_000,
        attempt=1,
        fencing_token=48,
        worker_id="worker-2",
        started_us=T + 600_001_000,
        attempts=(Attempt(number=1, worker_id="worker-2", fencing_token=48, started_us=T + 600_001_000),),
        lease_ttl_us=30_000_000,
        lease_expires_us=T + 630_001_000,
        deadline_us=T + 4_200_001_000,
    )
    skipped = Run(
        job_id="nightly-backup",
        scheduled_us=T,
        status="skipped",
        reason="paused",
        claimed_us=T + 6,
        claim_index=41,
        spec_version=4,
        effective_us=T,
    )
    return State(
        applied_index=48,
        now_us=T + 600_001_000,
        epoch=3,
        leader_id="10.0.0.2:7000",
        leader_term=9,
        jobs={"nightly-backup": backup, "hello": hello},
        runs={"nightly-backup": [skipped], "hello": [finished, retrying, leased]},
        live_runs={"hello": [T + 300_000_000, T + 600_000_000]},
        leased_runs={"hello": [T + 600_000_000]},
        request_results={
            "req-1": Result(index=38, events=(JobAdded("hello", 1), JobAdded("nightly-backup", 1))),
            "req-2": Result(index=39, rejection=Rejection(code="not_found", message="job 'x' does not exist")),
        },
        request_fifo=["req-1", "req-2"],
        run_count=4,
        cluster_version=cluster_version,
        calendars={"us-holidays": US_HOLIDAYS, "closures": CLOSURES} if cluster_version >= 3 else {},
    )


def live_index(state: State) -> dict[str, list[int]]:
    """The live-run index as derived from the runs themselves."""
    index = {}
    for job_id, runs in state.runs.items():
        live = [run.scheduled_us for run in runs if run.status in LIVE_STATUSES]
        if live:
            index[job_id] = live
    return index


def golden_state_format_3() -> State:
    """The golden state at cluster version 3, with jobs and runs holding the fields of format 3."""
    state = golden_state(cluster_version=3)
    standup = Job.of(MULTI_SPEC, 1, "alice", T + 21, cursor_us=T, next_due_us=T + 7_200_000_000)
    standup.counted_runs = 1
    state.jobs["standup"] = standup
    state.jobs["poll"] = Job.of(INTERVAL_SPEC, 1, "alice", T + 21, cursor_us=T, next_due_us=T + 90_000_000)
    state.jobs["rebuild-index"] = Job.of(MANUAL_SPEC, 1, "alice", T + 21, cursor_us=T, next_due_us=0)
    run = Run(job_id="standup", scheduled_us=T, status="queued", claimed_us=T + 22, claim_index=49, spec_version=1)
    run.schedule_index = 1
    state.runs["standup"] = [run]
    state.live_runs["standup"] = [T]
    state.run_count += 1
    return state


# -- golden file handling ----------------------------------------------------------------


def _commands_text() -> str:
    lines = [
        f"# raftcron command log format v{COMMAND_FORMAT_VERSION}: <name> <hex of encode_command(command)>",
        "# Generated by tests/unit/core/test_codec_golden.py (RAFTCRON_REGEN_GOLDEN=1). Do not edit by hand.",
    ]
    lines += [f"{name} {encode_command(command).hex()}" for name, command in COMMANDS.items()]
    return "\n".join(lines) + "\n"


def _snapshot_text(version: int = SNAPSHOT_FORMAT_VERSION, format_3_fields: bool = False) -> str:
    cluster_version = CLUSTER_VERSION_OF_FORMAT[version]
    data = encode_snapshot(golden_state_format_3() if format_3_fields else golden_state(cluster_version)).hex()
    state = "golden_state()" if cluster_version == 1 else f"golden_state(cluster_version={cluster_version})"
    state = "golden_state_format_3()" if format_3_fields else state
    lines = [
        f"# raftcron snapshot format v{version}: hex of encode_snapshot({state}), wrapped",
        "# Generated by tests/unit/core/test_codec_golden.py (RAFTCRON_REGEN_GOLDEN=1). Do not edit by hand.",
    ]
    lines += [data[i : i + 96] for i in range(0, len(data), 96)]
    return "\n".join(lines) + "\n"


def _write_golden(path: Path, text: str, parse=None) -> None:
    """Write `text`; first archive the old content if new text drops or changes any old entry.

    With `parse` (text -> {name: bytes}), adding entries alone keeps no archive copy.
    """
    if path.exists():
        old = path.read_text()
        if old == text:
            return
        if parse is None or any(parse(text).get(name) != data for name, data in parse(old).items()):
            digest = hashlib.sha256(old.encode()).hexdigest()[:8]
            path.rename(path.with_name(f"{path.stem}.{digest}{path.suffix}"))
    path.write_text(text)


def regenerate_golden() -> None:
    GOLDEN.mkdir(exist_ok=True)
    _write_golden(COMMANDS_FILE, _commands_text(), parse=_parse_commands)
    _write_golden(SNAPSHOT_FILE, _snapshot_text())
    _write_golden(VERSIONED_SNAPSHOT_FILE, _snapshot_text(VERSIONED_SNAPSHOT_FORMAT_VERSION))
    _write_golden(FORMAT_3_SNAPSHOT_FILE, _snapshot_text(VERSIONED_SNAPSHOT_FORMAT_VERSION, format_3_fields=True))
    _write_golden(CALENDARS_SNAPSHOT_FILE, _snapshot_text(CALENDARS_SNAPSHOT_FORMAT_VERSION))


def _payload_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def _parse_commands(text: str) -> dict[str, bytes]:
    entries = {}
    for line in _payload_lines(text):
        name, hex_bytes = line.split(" ")
        entries[name] = bytes.fromhex(hex_bytes)
    return entries


if REGENERATE:
    regenerate_golden()


def read_commands(path: Path) -> dict[str, bytes]:
    return _parse_commands(path.read_text())


def read_snapshot(path: Path) -> bytes:
    return bytes.fromhex("".join(_payload_lines(path.read_text())))


# -- commands ---------------------------------------------------------------------------


def test_golden_commands_decode_to_the_objects() -> None:
    golden = read_commands(COMMANDS_FILE)
    assert set(golden) == set(COMMANDS), "golden file and COMMANDS disagree: regenerate deliberately"
    for name, data in golden.items():
        assert data[0] == COMMAND_FORMAT_VERSION
        assert decode_command(data) == COMMANDS[name], name


def test_encoding_today_gives_the_golden_bytes() -> None:
    golden = read_commands(COMMANDS_FILE)
    for name, command in COMMANDS.items():
        assert encode_command(command) == golden[name], f"{name}: the log format changed"


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("commands_v*.txt")), ids=lambda p: p.name)
def test_every_committed_command_file_stays_readable(path: Path) -> None:
    for name, data in read_commands(path).items():
        assert decode_command(data) == COMMANDS[name], f"{path.name}:{name}"


def test_every_command_type_has_a_golden_entry() -> None:
    covered = {type(command) for command in COMMANDS.values()}
    missing = sorted(t.__name__ for t in typing.get_args(Command) if t not in covered)
    assert not missing, f"add representative {missing} to COMMANDS and run with RAFTCRON_REGEN_GOLDEN=1"


def test_tags_are_the_class_names() -> None:
    # The tag is part of the format: renaming a command class breaks old logs.
    for command in COMMANDS.values():
        decoded = msgspec.msgpack.decode(encode_command(command)[1:])
        assert decoded["type"] == type(command).__name__


# -- snapshots --------------------------------------------------------------------------


def test_golden_snapshot_decodes_to_the_state() -> None:
    assert decode_snapshot(read_snapshot(SNAPSHOT_FILE)) == golden_state()


def test_snapshot_encoding_today_gives_the_golden_bytes() -> None:
    assert encode_snapshot(golden_state()) == read_snapshot(SNAPSHOT_FILE), "the snapshot format changed"


def test_versioned_snapshot_decodes_to_the_state_and_encodes_to_its_bytes() -> None:
    data = read_snapshot(VERSIONED_SNAPSHOT_FILE)
    assert data[len(SNAPSHOT_MAGIC)] == VERSIONED_SNAPSHOT_FORMAT_VERSION
    assert decode_snapshot(data) == golden_state(cluster_version=2)
    assert encode_snapshot(golden_state(cluster_version=2)) == data, "the snapshot format changed"


def test_a_state_at_cluster_version_1_keeps_format_2_and_its_digest() -> None:
    """Old nodes read it, and replicas of mixed versions compare equal digests."""
    data = encode_snapshot(golden_state(cluster_version=1))
    assert data[len(SNAPSHOT_MAGIC)] == SNAPSHOT_FORMAT_VERSION
    assert b"cluster_version" not in data
    assert b"cluster_version" in encode_snapshot(golden_state(cluster_version=2))


def test_calendars_snapshot_decodes_to_the_state_and_encodes_to_its_bytes() -> None:
    data = read_snapshot(CALENDARS_SNAPSHOT_FILE)
    assert data[len(SNAPSHOT_MAGIC)] == CALENDARS_SNAPSHOT_FORMAT_VERSION
    assert decode_snapshot(data) == golden_state(cluster_version=3)
    assert decode_snapshot(data).calendars["us-holidays"].dates == ("2027-07-05", "2027-09-06")
    assert encode_snapshot(golden_state(cluster_version=3)) == data, "the snapshot format changed"
    with pytest.raises(NewerLogFormat, match="needs log format 3"):
        decode_snapshot(data, max_log_format=2)


def test_a_state_below_cluster_version_3_leaves_calendars_out() -> None:
    """Format 2 and 3 snapshots keep the bytes (and digests) nodes without calendars write."""
    assert b"calendars" not in encode_snapshot(golden_state(cluster_version=2))
    assert b"calendars" in encode_snapshot(golden_state(cluster_version=3))


def test_a_node_capped_at_format_1_refuses_the_versioned_snapshot() -> None:
    with pytest.raises(NewerLogFormat, match="needs log format 2"):
        decode_snapshot(read_snapshot(VERSIONED_SNAPSHOT_FILE), max_log_format=1)
    assert decode_snapshot(read_snapshot(SNAPSHOT_FILE), max_log_format=1) == golden_state()


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("snapshot_v*.txt")), ids=lambda p: p.name)
def test_every_committed_snapshot_file_stays_readable(path: Path) -> None:
    data = read_snapshot(path)
    assert decode_snapshot(data) == golden_state(CLUSTER_VERSION_OF_FORMAT[data[len(SNAPSHOT_MAGIC)]])


def test_the_snapshot_with_format_3_fields_decodes_to_the_state_and_encodes_to_its_bytes() -> None:
    data = read_snapshot(FORMAT_3_SNAPSHOT_FILE)
    assert decode_snapshot(data) == golden_state_format_3()
    assert encode_snapshot(golden_state_format_3()) == data, "the snapshot format changed"
    with pytest.raises(NewerLogFormat, match="needs log format 3"):
        decode_snapshot(data, max_log_format=2)


def test_format_3_fields_left_unset_are_left_out_of_the_bytes() -> None:
    """The old golden bytes hold none of the new field names: an old spec encodes as before."""

    def key(name: str) -> bytes:  # a msgpack map key: its fixstr header, then the name
        return bytes([0xA0 | len(name)]) + name.encode()

    # (`at_us` is not checked: a job's Change record has a field of that name.)
    for name in ("schedules", "every_us", "anchor_us", "active", "max_runs", "counted_runs", "schedule_index"):
        assert key(name) not in read_snapshot(SNAPSHOT_FILE)
        assert key(name) in read_snapshot(FORMAT_3_SNAPSHOT_FILE)
    assert key("schedule_indexes") not in encode_command(COMMANDS["claim_runs"])


@pytest.mark.parametrize("name", FORMAT_3_COMMANDS)
def test_a_node_capped_at_format_2_refuses_format_3_commands(name: str) -> None:
    with pytest.raises(NewerLogFormat, match="needs log format 3"):
        decode_command(encode_command(COMMANDS[name]), max_log_format=2)


def test_golden_state_is_consistent() -> None:
    state = golden_state()
    assert state.live_runs == live_index(state)
    assert state.run_count == sum(len(runs) for runs in state.runs.values())


def test_snapshot_from_before_the_live_index_restores_consistently() -> None:
    restored = decode_snapshot(read_snapshot(GOLDEN / "legacy_snapshot_v1_before_live_index.txt"))
    assert restored.runs["hello"][1].status == "queued"
    # Either refused outright as an unknown format, or restored with a usable index.
    assert restored.live_runs == live_index(restored)
    queued_at = restored.runs["hello"][1].scheduled_us
    granted = apply(
        restored,
        GrantLeases(restored.now_us + 1, restored.epoch, "w", 30_000_000, (RunRef("hello", queued_at),)),
        restored.applied_index + 1,
    )
    token = granted.events[0].fencing_token
    done = CompleteRuns(restored.now_us + 2, (Completion(LeaseRef("hello", queued_at, token), "w", "success"),))
    apply(restored, done, restored.applied_index + 1)
    assert restored.live_runs == live_index(restored) == {}


def test_snapshot_bytes_do_not_depend_on_insertion_order() -> None:
    state = golden_state()
    reordered = msgspec.structs.replace(
        state,
        jobs=dict(reversed(list(state.jobs.items()))),
        runs=dict(reversed(list(state.runs.items()))),
        live_runs=dict(reversed(list(state.live_runs.items()))),
        request_results=dict(reversed(list(state.request_results.items()))),
    )
    assert list(reordered.jobs) != list(state.jobs)
    assert encode_snapshot(reordered) == read_snapshot(SNAPSHOT_FILE)


# -- rejection of what this version does not understand ------------------------------------


@pytest.mark.parametrize("version", [0, 3, 0x82, 255])  # 1 plain, 2 compressed
def test_unknown_command_version_byte(version: int) -> None:
    data = encode_command(COMMANDS["claim_leadership"])
    with pytest.raises(NewerLogFormat, match="version"):
        decode_command(bytes([version]) + data[1:])


def test_unknown_command_tag() -> None:
    body = msgspec.msgpack.encode({"type": "DropAllJobs", "issued_at_us": T})
    with pytest.raises(NewerLogFormat, match="unknown command type"):
        decode_command(bytes([COMMAND_FORMAT_VERSION]) + body)


def test_unknown_field_is_a_newer_format() -> None:
    body = {"type": "ClaimLeadership", "issued_at_us": T, "node_id": "n", "term": 1, "extra": 1}
    with pytest.raises(NewerLogFormat, match="unknown field"):
        decode_command(bytes([COMMAND_FORMAT_VERSION]) + msgspec.msgpack.encode(body))


def test_a_node_capped_at_format_1_refuses_format_2_commands() -> None:
    data = encode_command(COMMANDS["set_cluster_version"])
    with pytest.raises(NewerLogFormat, match="SetClusterVersion needs log format 2"):
        decode_command(data, max_log_format=1)
    assert decode_command(encode_command(COMMANDS["read_barrier"]), max_log_format=1) == COMMANDS["read_barrier"]


@pytest.mark.parametrize(
    "body",
    [
        {"type": "ClaimLeadership", "issued_at_us": T, "node_id": "n", "term": 1, "extra": 1},  # unknown field
        {"type": "ClaimLeadership", "issued_at_us": T, "node_id": "n"},  # missing field
        {"type": "ClaimLeadership", "issued_at_us": "soon", "node_id": "n", "term": 1},  # wrong type
        {"issued_at_us": T, "node_id": "n", "term": 1},  # no tag
        [1, 2, 3],
        None,
    ],
    ids=["unknown-field", "missing-field", "wrong-type", "no-tag", "array", "nil"],
)
def test_malformed_command_bodies(body) -> None:
    with pytest.raises(CodecError):
        decode_command(bytes([COMMAND_FORMAT_VERSION]) + msgspec.msgpack.encode(body))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_truncation_of_a_command_is_rejected(name: str) -> None:
    data = encode_command(COMMANDS[name])
    for cut in range(len(data)):
        with pytest.raises(CodecError):
            decode_command(data[:cut])


def test_trailing_bytes_after_a_command_are_rejected() -> None:
    with pytest.raises(CodecError):
        decode_command(encode_command(COMMANDS["read_barrier"]) + b"\x00")


def test_snapshot_with_wrong_magic_or_version_or_truncated() -> None:
    data = read_snapshot(SNAPSHOT_FILE)
    header = len(SNAPSHOT_MAGIC) + 1
    bad = [
        b"",
        b"XYZ" + data[3:],
        SNAPSHOT_MAGIC + bytes([SNAPSHOT_FORMAT_VERSION + 1]) + data[header:],
        encode_command(COMMANDS["read_barrier"]),
        data + b"\x00",
    ]
    bad += [data[:cut] for cut in range(0, len(data), 7)]
    for candidate in bad:
        with pytest.raises(CodecError):
            decode_snapshot(candidate)
