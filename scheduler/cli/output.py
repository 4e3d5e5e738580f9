"""How the CLI prints: aligned text for people, JSON for scripts (times ISO-8601 UTC).

Text a worker or a submitter wrote (errors, reasons, messages) reaches people through `shown_text`:
one line, control characters as visible escapes, never raw to the terminal. JSON needs nothing:
json.dumps escapes every control character."""

from __future__ import annotations

import json
import sys

from google.protobuf.json_format import MessageToDict

from scheduler.planning import format_us
from scheduler.planning.runkeys import readable_run_keys_in
from scheduler.rpc.convert import STATUS_FROM_PB, duration_us, timestamp_us
from scheduler.security.safetext import shown_text


def _iso(message, field: str) -> str:
    return format_us(timestamp_us(getattr(message, field))) if message.HasField(field) else ""


def _table(rows: list[list[str]], header: list[str]) -> None:
    rows = [[shown_text(str(cell)) for cell in row] for row in rows]
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for row in [header] + rows:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())


def _freshness(read) -> None:
    source = "leader-confirmed" if read.from_leader else "local replica"
    print(f"(read from {read.node_id}, {source}, applied index {read.applied_index})", file=sys.stderr)


def print_freshness(read) -> None:
    """Where a read came from, on stderr (stdout stays the answer)."""
    _freshness(read)


def run_dict(run) -> dict:
    return {
        "job_id": run.job_id,
        "scheduled_at": _iso(run, "scheduled_at"),
        "run_key": run.run_key,
        "status": STATUS_FROM_PB.get(run.status, "unknown"),
        "reason": readable_run_keys_in(run.reason),
        "kind": run.kind,
        # For a job with several schedules: the index into its `schedules:` that produced the slot.
        "schedule_index": run.schedule_index if run.HasField("schedule_index") else None,
        "effective_at": _iso(run, "effective_at"),
        "claimed_at": _iso(run, "claimed_at"),
        "claim_index": run.claim_index,
        "attempt": run.attempt,
        "fencing_token": run.fencing_token,
        "worker_id": run.worker_id,
        "started_at": _iso(run, "started_at"),
        "finished_at": _iso(run, "finished_at"),
        "exit_code": run.exit_code,
        "error": run.error,
    }


def spread_us(job) -> int:
    """The herd spread the answering node computed for `job` (0 from a node that sends none)."""
    return duration_us(job, "spread", 0)


def job_dict(job) -> dict:
    spec = MessageToDict(job.spec, preserving_proto_field_name=True)
    next_us = timestamp_us(job.next_due) if job.HasField("next_due") else 0
    return {
        "id": job.spec.id,
        "version": job.version,
        "author": job.author,
        "paused": job.paused,
        "cursor": _iso(job, "cursor"),
        "next_due": _iso(job, "next_due"),
        # When the leader releases that slot: its nominal instant plus the job's herd spread.
        "next_due_at": format_us(next_us + spread_us(job)) if next_us else "",
        "spread_s": spread_us(job) / 1_000_000,
        "last_status": STATUS_FROM_PB.get(job.last_status, ""),
        "last_scheduled_at": _iso(job, "last_scheduled_at"),
        "counted_runs": job.counted_runs if job.HasField("counted_runs") else None,
        "state": _owing_state(job),
        "spec": spec,
    }


def _owing_state(job) -> str:
    """Why the job owes no slot, its active window, its run count (planning/slot_text.py)."""
    from scheduler.planning.slot_text import owing_state
    from scheduler.rpc.convert import spec_from_pb

    last_us = timestamp_us(job.last_scheduled_at) if job.HasField("last_scheduled_at") else 0
    next_us = timestamp_us(job.next_due) if job.HasField("next_due") else 0
    counted = job.counted_runs if job.HasField("counted_runs") else 0
    # The replica's time is not in the message: the cursor is the latest instant it vouches for.
    return owing_state(spec_from_pb(job.spec), next_us, counted, last_us, timestamp_us(job.cursor))


def print_runs_list(runs_pb, as_json: bool) -> None:
    runs = [run_dict(r) for r in runs_pb]
    if as_json:
        print(json.dumps(runs, indent=2))
        return
    rows = [[r["job_id"], r["scheduled_at"], r["kind"], r["status"], str(r["attempt"]), r["reason"]] for r in runs]
    header = ["JOB", "SCHEDULED (UTC)", "KIND", "STATUS", "ATTEMPTS", "REASON"]
    if any(r["schedule_index"] is not None for r in runs):  # a job with several schedules
        for row, r in zip(rows, runs):
            row.insert(3, f"schedules[{r['schedule_index']}]" if r["schedule_index"] is not None else "")
        header.insert(3, "SCHEDULE")
    _table(rows, header)


def print_runs(response, as_json: bool) -> None:
    print_runs_list(response.runs, as_json)
    if response.next_page_token and not as_json:
        print("(more runs: raise --limit or narrow --since/--until)")
    _freshness(response.read)


def print_jobs(response, as_json: bool) -> None:
    jobs = [job_dict(j) for j in response.jobs]
    if as_json:
        print(json.dumps(jobs, indent=2))
    else:
        rows = [
            [
                j["id"],
                _how_it_fires(job),
                j["spec"].get("timezone", ""),
                j["next_due"],
                _due_cell(j["next_due_at"], j["spread_s"]),
                j["last_status"],
                "; ".join(part for part in ("paused" if j["paused"] else "", j["state"]) if part),
            ]
            for j, job in zip(jobs, response.jobs)
        ]
        _table(rows, ["JOB", "SCHEDULE", "ZONE", "NEXT SLOT (UTC)", "RUNS AT (UTC, spread)", "LAST", ""])
    _freshness(response.read)


def _how_it_fires(job) -> str:
    from scheduler.planning.slot_text import how_it_fires
    from scheduler.rpc.convert import spec_from_pb

    return how_it_fires(spec_from_pb(job.spec))


def spread_text(spread_s: float) -> str:
    """A spread as `+12m34.5s`: how long after its nominal instant a slot runs."""
    minutes, seconds = divmod(spread_s, 60)
    hours, minutes = divmod(int(minutes), 60)
    if not (minutes or hours):
        return f"+{seconds:.1f}s".replace(".0s", "s")
    text = f"{seconds:04.1f}s".replace(".0s", "s")
    text = f"{minutes:02d}m{text}" if hours else f"{minutes}m{text}"
    return f"+{hours}h{text}" if hours else f"+{text}"


def _due_cell(due: str, spread_s: float) -> str:
    if not due:
        return ""
    return f"{due} ({spread_text(spread_s)})" if spread_s else f"{due} (no spread)"


def print_job(job, as_json: bool) -> None:
    print(
        json.dumps(job_dict(job), indent=2)
        if as_json
        else shown_text(f"{job.spec.id}: {'paused' if job.paused else 'active'}")
    )


def print_changes(response, as_json: bool, dry_run: bool) -> None:
    changes = [{"job_id": c.job_id, "change": c.change, "version": c.version} for c in response.changes]
    if as_json:
        print(json.dumps({"dry_run": dry_run, "applied_index": response.applied_index, "changes": changes}, indent=2))
        return
    for change in changes:
        print(shown_text(f"{change['change']:>9}  {change['job_id']} (v{change['version']})"))
    print("dry run: nothing applied" if dry_run else f"applied at index {response.applied_index}")


def status_dict(status) -> dict:
    return {
        "node_id": status.node_id,
        "role": status.role,
        "leader": status.leader,
        "leader_grpc_address": status.leader_grpc_address,
        "term": status.term,
        "epoch": status.epoch,
        "commit_index": status.commit_index,
        "applied_index": status.applied_index,
        "ready": status.ready,
        "replicated_time": _iso(status, "replicated_time"),
        "job_count": status.job_count,
        "run_count": status.run_count,
        "cluster_version": status.cluster_version,
        "log_format": status.log_format,
        "voter_log_formats": [
            {"node_id": v.node_id, "raft_address": v.raft_address, "log_format": v.log_format}
            for v in status.voter_log_formats
        ],
        "halted": status.halted,
        "herd_window_s": (status.herd_window.seconds + status.herd_window.nanos / 1e9)
        if status.HasField("herd_window")
        else None,
        "peers": [
            MessageToDict(p, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
            for p in status.peers
        ],
        "raft_voters": list(status.raft_voters),
    }


def print_status(status, as_json: bool) -> None:
    info = status_dict(status)
    if as_json:
        print(json.dumps(info, indent=2))
        return
    print(
        f"node {info['node_id']} is {info['role']}; leader {info['leader'] or '(none)'}; "
        f"term {info['term']}, epoch {info['epoch']}; commit {info['commit_index']}, applied {info['applied_index']}"
    )
    _table(
        [
            [
                p["node_id"],
                p["raft_address"],
                p["grpc_address"],
                "up" if p["connected"] else "DOWN",
                str(p.get("match_index", 0)),
            ]
            for p in info["peers"]
        ],
        ["PEER", "RAFT", "GRPC", "LINK", "MATCH"],
    )
    if info["halted"]:
        print(f"HALTED: {info['halted']}")
    behind = [
        f"{v['node_id'] or v['raft_address']} ({v['log_format'] or 'not heard'})"
        for v in info["voter_log_formats"]
        if v["log_format"] < info["log_format"]
    ]
    print(
        f"cluster version {info['cluster_version']}; this node reads log format {info['log_format']}"
        + (f"; voters reading less: {', '.join(behind)}" if behind else "")
    )
    listed = sorted(p["raft_address"] for p in info["peers"])
    if info["raft_voters"] and sorted(info["raft_voters"]) != listed:
        print(
            f"Raft voters {', '.join(info['raft_voters'])} differ from the members listed: a membership "
            "change is half done; repeat the last `raftcron cluster` command"
        )


def print_kills(response, as_json: bool) -> None:
    active = [
        {
            "class": k.job_class,
            "reason": k.reason,
            "author": k.author,
            "killed_at": _iso(k, "killed_at"),
            "until": _iso(k, "until"),
            "cancel_running": k.cancel_running,
        }
        for k in response.active
    ]
    audit = [
        {"action": r.action, "class": r.job_class, "author": r.author, "at": _iso(r, "at"), "reason": r.reason}
        for r in response.audit
    ]
    if as_json:
        print(json.dumps({"active": active, "audit": audit}, indent=2))
        return
    _table(
        [[k["class"], k["author"], k["killed_at"], k["until"] or "revive", k["reason"]] for k in active],
        ["CLASS", "BY", "SINCE", "UNTIL", "REASON"],
    )
    for r in audit[:10]:
        print(shown_text(f"  {r['at']}  {r['action']:6}  {r['class']}  by {r['author']}  {r['reason']}"))


def _slots(alert: dict) -> str:
    """How many slots a streak stands for, and until when; "1" for a single slot."""
    if alert["count"] <= 1:
        return "1"
    until = f" to {alert['last_scheduled_at']}" if alert["last_scheduled_at"] else ""
    return f"{alert['count']}{until}{' (open)' if alert['open'] else ''}"


def print_alerts(response, as_json: bool) -> None:
    alerts = [
        {
            "id": a.id,  # the dedup key as stored (a webhook's Idempotency-Key)
            "readable_id": readable_run_keys_in(a.id),
            "kind": a.kind,
            "job_id": a.job_id,
            "owner": a.owner,
            "scheduled_at": _iso(a, "scheduled_at"),
            "created_at": _iso(a, "created_at"),
            "delivered_at": _iso(a, "delivered_at"),
            "message": readable_run_keys_in(a.message),
            "count": a.count or 1,
            "last_scheduled_at": _iso(a, "last_scheduled_at"),
            "open": a.open,
        }
        for a in response.alerts
    ]
    if as_json:
        print(json.dumps({"pending": response.pending, "alerts": alerts}, indent=2))
        return
    print(f"{response.pending} pending")
    _table(
        [
            [
                a["kind"],
                a["job_id"],
                a["owner"],
                a["scheduled_at"],
                _slots(a),
                a["delivered_at"] or "PENDING",
                a["message"][:60],
            ]
            for a in alerts
        ],
        ["KIND", "JOB", "OWNER", "SLOT", "COUNT", "DELIVERED", "MESSAGE"],
    )


def print_fires(fires: list[dict], as_json: bool) -> None:
    """Upcoming fires; for a job's fires (with `due_at`), the instant each runs beside its slot."""
    if as_json:
        print(json.dumps(fires, indent=2))
        return
    from scheduler.cli.calendars import fire_note

    for fire in fires:
        note = f"  ({fire['adjustment']})" if fire.get("adjustment") else ""
        due = ""
        if "due_at" in fire:
            due = f"  runs at {fire['due_at']} ({spread_text(fire['spread_s'])})" if fire["spread_s"] else ""
        print(shown_text(f"{fire['at']}  = {fire['at_utc']}{due}{note}{fire_note(fire)}"))
