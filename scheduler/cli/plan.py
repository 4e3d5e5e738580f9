"""`raftcron plan -f FILE`: the diff an apply would make, each job's effective settings and next fires."""

from __future__ import annotations

import json

from scheduler.cli.times import now_iso
from scheduler.planning import preview
from scheduler.specs import load_job_document, spec_to_document

NEXT_FIRES = 3


def plan(args) -> str:
    from scheduler.cli import _client, apply_request

    document = load_job_document(args.file)
    with _client(args) as client:
        changes = client.apply_jobs(apply_request(document, args.prune, dry_run=True)).changes
    after = now_iso()
    specs = {spec.id: spec for spec in document.jobs}
    entries = []
    for change in changes:
        spec = specs.get(change.job_id)
        entry = {"job_id": change.job_id, "change": change.change, "version": change.version}
        if spec is not None:
            entry["effective"] = spec_to_document(spec, full=True)
            fires = preview(spec.schedule, spec.timezone, after, NEXT_FIRES, spec.dst_gap or None, spec.dst_repeat or None)
            entry["next_fires"] = [fire["at"] + (f" ({fire['adjustment']})" if fire["adjustment"] else "") for fire in fires]
        entries.append(entry)
    if args.json:
        return json.dumps(entries, indent=2)
    lines = []
    for entry in entries:
        lines.append(f"{entry['change']:>9}  {entry['job_id']} (v{entry['version']})")
        if entry["change"] in ("added", "changed"):
            lines.append("           next: " + ", ".join(entry.get("next_fires", [])))
    counts = {kind: sum(e["change"] == kind for e in entries) for kind in ("added", "changed", "removed", "unchanged")}
    lines.append(", ".join(f"{n} {kind}" for kind, n in counts.items()) + "  (nothing applied; run `raftcron apply`)")
    return "\n".join(lines)
