"""`raftcron explain` for jobs in a dependency chain (`after:`): a child's slot with its parents'
runs of the same slot, and every job's parents and children (docs/design/job-dependencies.md)."""

from __future__ import annotations

import grpc

from scheduler.cli import output as out
from scheduler.planning import format_us, parse_iso_to_us
from scheduler.rpc.convert import printable_run_key, timestamp, timestamp_us
from worker.api.v1 import runs_pb2


def _parent_run(client, parent_id: str, slot_us: int) -> dict | None:
    try:
        return out.run_dict(client.get_run(job_id=parent_id, scheduled_at=timestamp(slot_us)).run)
    except grpc.RpcError as error:
        if error.code() == grpc.StatusCode.NOT_FOUND:
            return None
        raise


def parents_at(client, parents: list[str], slot_us: int) -> list[dict]:
    """Each parent's run of `slot_us`: {job_id, run_key, status}; status "no run" when it has none
    (not claimed yet, or pruned)."""
    found = []
    for parent_id in parents:
        run = _parent_run(client, parent_id, slot_us)
        status = run["status"] if run is not None else "no run"
        found.append({"job_id": parent_id, "run_key": printable_run_key(parent_id, slot_us), "status": status})
    return found


def chain_lines(answer: dict) -> list[str]:
    """The lines explain adds under its sentence for a job with parents or children."""
    lines = []
    if answer.get("parents"):
        shown = ", ".join(f"{p['run_key']} {p['status']}" for p in answer["parents"])
        lines.append(f"parents' runs of the slot: {shown}")
    if answer.get("after"):
        lines.append(f"runs after: {', '.join(answer['after'])}")
    if answer.get("children"):
        lines.append(f"runs before: {', '.join(answer['children'])}")
    return lines


def explain_child(client, job, job_id: str, at_us: int, window_us: int, sentence) -> dict:
    """The answer for a job that runs `after:` others: its run nearest `at_us` (its slots are its
    parents'), or what it is waiting for. `sentence(run dict)`: explain's sentence for a run."""
    parents = list(job.spec.after)
    response = client.list_runs(
        runs_pb2.ListRunsRequest(
            job_id=job_id, since=timestamp(at_us - window_us), until=timestamp(at_us + window_us), page_size=1000
        )
    )
    runs = [out.run_dict(r) for r in response.runs]
    nearest = min(runs, key=lambda r: abs(parse_iso_to_us(r["scheduled_at"]) - at_us), default=None)
    if nearest is not None:
        slot_us = parse_iso_to_us(nearest["scheduled_at"])
        answer = {"slot": nearest["scheduled_at"], "run": nearest, "explanation": sentence(nearest)}
    else:
        slot_us = _parents_slot_near(client, parents[0], at_us, window_us)
        if slot_us is None:
            text = f"{job_id} has no run near {format_us(at_us)}, and its parent {parents[0]} no slot"
            return {"slot": None, "explanation": text, "after": parents}
        answer = {
            "slot": format_us(slot_us),
            "explanation": f"slot {format_us(slot_us)} of {job_id} is not decided yet:"
            " it is claimed once every parent's run of it ended (queued if all succeeded, else skipped)",
        }
    answer["parents"] = parents_at(client, parents, slot_us)
    answer["after"] = parents
    return answer


def _parents_slot_near(client, parent_id: str, at_us: int, window_us: int) -> int | None:
    """The parent's run key nearest `at_us` (retained runs only)."""
    response = client.list_runs(
        runs_pb2.ListRunsRequest(
            job_id=parent_id, since=timestamp(at_us - window_us), until=timestamp(at_us + window_us), page_size=1000
        )
    )
    slots = [timestamp_us(r.scheduled_at) for r in response.runs if r.kind != "manual"]
    return min(slots, key=lambda s: abs(s - at_us), default=None)
