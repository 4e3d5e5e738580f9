"""`raftcron plan -f FILE`: what an apply would change, field by field, and when each new or
changed job is next due, herd spread included.

The diff and the due instants are pure functions of the specs (tests call them directly); the
command only fetches the cluster's side: the dry-run changes, the stored specs of the jobs that
change and the herd window the leader spreads slots by.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import grpc

from scheduler.cli import connection
from scheduler.cli.runs import upcoming_text
from scheduler.cli.times import parse_when
from scheduler.planning import format_us, preview
from scheduler.planning.durations import format_duration_us
from scheduler.planning.jobs import first_due_after, spread_offset_us
from scheduler.planning.slots import is_manual_only, parents_of
from scheduler.security.safetext import shown_text
from scheduler.specs import spec_to_document

NEXT_SLOTS = 3
VALUE_CHARS = 60
# Past this many changed jobs their stored specs are read a page at a time, not one by one.
GET_ONE_BY_ONE = 50
CHANGE_MARKS = {"added": "+", "changed": "~", "removed": "-", "unchanged": "="}


def flatten(document: dict, prefix: str = "") -> dict[str, object]:
    """`{"retry": {"max_attempts": 3}}` -> `{"retry.max_attempts": 3}`; lists stay whole values."""
    flat: dict[str, object] = {}
    for key, value in document.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


@dataclass(frozen=True)
class FieldChange:
    field: str
    old: object  # None: the field was not there
    new: object


def field_changes(old_document: dict, new_document: dict) -> list[FieldChange]:
    """Each leaf field that differs between two job documents, in a stable order."""
    old, new = flatten(old_document), flatten(new_document)
    fields = list(old) + [name for name in new if name not in old]
    return [FieldChange(name, old.get(name), new.get(name)) for name in fields if old.get(name) != new.get(name)]


def shown_value(value: object, limit: int = VALUE_CHARS) -> str:
    """A value as JSON (strings quoted), shortened in the middle past `limit` characters."""
    if value is None:
        return "(unset)"
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if len(text) <= limit:
        return text
    half = (limit - 1) // 2
    return text[:half] + "…" + text[-half:]


@dataclass(frozen=True)
class NextDue:
    slot_us: int  # the nominal slot: the run key's instant; 0 when the schedule never fires again
    spread_us: int | None  # None: the herd window is not known, so only the nominal slot is
    herd_window_us: int | None

    @property
    def due_us(self) -> int | None:
        return None if self.spread_us is None else self.slot_us + self.spread_us


def next_due(spec, after_us: int, herd_window_us: int | None) -> NextDue:
    """The job's first slot after `after_us` and when it becomes due: the same spread function the
    leader's planner applies, so with the cluster's herd window this is the instant it will use."""
    slot_us = first_due_after(spec, after_us)
    if herd_window_us is None:
        return NextDue(slot_us, None, None)
    return NextDue(slot_us, spread_offset_us(spec, None, herd_window_us), herd_window_us)


def spread_text(spread_us: int) -> str:
    """`33m38.22161s`: whole units as durations are written, the fraction as decimal seconds."""
    whole_us, fraction_us = divmod(spread_us, 1_000_000)
    text = format_duration_us(whole_us * 1_000_000) if whole_us else ""
    if not fraction_us:
        return text or "0s"
    seconds = text.rsplit("m", 1)[-1].rsplit("h", 1)[-1].rsplit("d", 1)[-1] if text.endswith("s") else ""
    head = text[: len(text) - len(seconds)]
    whole_seconds = int(seconds[:-1]) if seconds else 0
    return f"{head}{whole_seconds}.{fraction_us:06d}".rstrip("0") + "s"


def calendar_slots_text(spec, calendars: dict, after_us: int) -> list[str]:
    """A calendar job's next slots (it has one plain `schedule:`), each with what its calendar does."""
    from scheduler.cli.calendars import annotate_fires, fire_note

    schedule_args = (spec.schedule, spec.timezone, spec.dst_gap or None, spec.dst_repeat or None)
    fires = preview(schedule_args[0], schedule_args[1], format_us(after_us), NEXT_SLOTS, *schedule_args[2:])
    fires = annotate_fires(fires, spec.calendar, calendars, schedule_args, after_us)
    return [fire["at"] + (f" ({fire['adjustment']})" if fire["adjustment"] else "") + fire_note(fire) for fire in fires]


def due_text(due: NextDue, manual_only: bool = False, parents: tuple[str, ...] = ()) -> str:
    if parents:
        return f"after {', '.join(parents)}: runs for a slot of theirs once their runs of it succeed"
    if manual_only:
        return "manual-only: runs only when triggered (raftcron trigger)"
    if not due.slot_us:
        return "never fires again"
    slot = format_us(due.slot_us)
    if due.spread_us is None:
        return f"next slot {slot} (nominal: the cluster did not report its herd window, so the spread is unknown)"
    if due.spread_us == 0:
        return f"next due {slot} (its slot; no herd spread)"
    window = format_duration_us(due.herd_window_us or 0)
    spread = spread_text(due.spread_us)
    return f"next due {format_us(due.slot_us + due.spread_us)} (slot {slot} + {spread} herd spread, window {window})"


def cluster_herd_window_us(client) -> int | None:
    """The herd window the leader spreads by (asked of the leader when another node answers);
    None from nodes that do not report one."""
    status = client.status()
    if status.role != "leader" and status.leader_grpc_address:
        try:
            status = client.status(address=status.leader_grpc_address)
        except (grpc.RpcError, ValueError):  # the leader's address may not be reachable from here
            pass  # this node's window is then the best guess: nodes are normally configured alike
    if not status.HasField("herd_window"):
        return None
    return status.herd_window.seconds * 1_000_000 + status.herd_window.nanos // 1000


def stored_specs(client, job_ids: list[str]) -> dict:
    """The cluster's specs of `job_ids`, as model specs."""
    from scheduler.rpc.convert import spec_from_pb

    wanted = set(job_ids)
    if len(wanted) <= GET_ONE_BY_ONE:
        return {job_id: spec_from_pb(client.get_job(job_id=job_id).job.spec) for job_id in sorted(wanted)}
    specs, token = {}, ""
    while True:
        page = client.list_jobs(page_size=1000, page_token=token)
        specs.update({job.spec.id: spec_from_pb(job.spec) for job in page.jobs if job.spec.id in wanted})
        token = page.next_page_token
        if not token:
            return specs


def plan_entries(
    changes, new_specs: dict, old_specs: dict, after_us: int, herd_window_us: int | None, calendars: dict | None = None
) -> list[dict]:
    """One entry per change of a dry-run apply: what changes field by field, when it is next due,
    and what its calendar (from `calendars`, name -> record) does to its next slots."""
    entries = []
    for change in changes:
        entry: dict = {"job_id": change.job_id, "change": change.change, "version": change.version}
        spec = new_specs.get(change.job_id)
        if spec is not None:
            document = spec_to_document(spec, full=True)
            entry["effective"] = document
            if change.change == "changed" and change.job_id in old_specs:
                old = spec_to_document(old_specs[change.job_id], full=True)
                entry["fields"] = [{"field": c.field, "from": c.old, "to": c.new} for c in field_changes(old, document)]
            if change.change in ("added", "changed"):
                due = next_due(spec, after_us, herd_window_us)
                entry["next_slot"] = format_us(due.slot_us) if due.slot_us else None
                entry["next_due"] = format_us(due.due_us) if due.slot_us and due.due_us is not None else None
                entry["herd_window_s"] = None if herd_window_us is None else herd_window_us / 1_000_000
                entry["due_text"] = due_text(due, is_manual_only(spec), parents_of(spec))
                entry["next_fires"] = (
                    calendar_slots_text(spec, calendars or {}, after_us)
                    if spec.calendar
                    else upcoming_text(spec, format_us(after_us), NEXT_SLOTS)
                )
        entries.append(entry)
    return entries


def render_plan(entries: list[dict]) -> str:
    lines = []
    for entry in entries:
        if entry["change"] == "unchanged":
            continue
        mark = CHANGE_MARKS.get(entry["change"], "?")
        lines.append(shown_text(f"{mark} {entry['job_id']}  ({entry['change']}, v{entry['version']})"))
        for change in entry.get("fields", []):
            lines.append(
                shown_text(f"    {change['field']}: {shown_value(change['from'])} -> {shown_value(change['to'])}")
            )
        if "due_text" in entry:
            lines.append(f"    {entry['due_text']}")
            lines.append("    slots: " + ", ".join(entry["next_fires"]))
    counts = {kind: sum(e["change"] == kind for e in entries) for kind in CHANGE_MARKS}
    lines.append(", ".join(f"{n} {kind}" for kind, n in counts.items()) + "  (nothing applied; run `raftcron apply`)")
    return "\n".join(lines)


def cmd_plan(args) -> int:
    from scheduler.cli.calendars import plan_calendars
    from scheduler.cli.jobs import apply_request, read_job_document
    from scheduler.cli.routes import route_changes, route_lines

    document = read_job_document(args.file)
    new_specs = {spec.id: spec for spec in document.jobs}
    with connection.cluster_client(args) as client:
        changes = client.apply_jobs(apply_request(document, args.prune, dry_run=True)).changes
        changed = [c.job_id for c in changes if c.change == "changed"]
        old_specs = stored_specs(client, changed) if changed else {}
        herd_window_us = cluster_herd_window_us(client)
        calendars = plan_calendars(client, document) if any(s.calendar for s in document.jobs) else {}
        routes = route_changes(client, document, args.prune)
    entries = plan_entries(changes, new_specs, old_specs, parse_when("now"), herd_window_us, calendars)
    if args.json:
        print(json.dumps(entries + routes, indent=2))
        return 0
    print("\n".join([*route_lines(routes), render_plan(entries)]))
    return 0
