"""The front page's problems and the workers page (pure: records in, markup out; every value escaped)."""

from __future__ import annotations

from html import escape

from scheduler.core.alerts import ALERTS_RETAINED, LATE_ALERT_US
from scheduler.dashboard import data
from scheduler.dashboard.problems import RUNS_LOOKED_AT_PER_JOB, WAITING_AFTER_US, Problems
from scheduler.dashboard.svg import run_href
from scheduler.dashboard.views import badge_html, job_href, layout, table_html, when
from scheduler.leader.worker_registry import EXPIRE_AFTER_US, WorkerSeen

# Seconds between reloads of the pages that watch the cluster. A <meta> refresh, not a script:
# the Content-Security-Policy (default-src 'none') forbids every script, and a refresh is no script.
REFRESH_S = 10


def span(us: int) -> str:
    """A round span for prose: 24 h, 1 min, 30 s (fates.human_duration_us for measured ones)."""
    seconds = us // 1_000_000
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def refresh_note() -> str:
    return (
        f'<p class="muted refresh">This page reloads every {REFRESH_S} s '
        '(<a href="?refresh=0">stop</a>; <a href="?">resume</a>).</p>'
    )


def _section(title: str, name: str, count: int, body: str) -> str:
    mark = badge_html(f"{count:,}", "bad") if count else badge_html("none", "succeeded")
    return f'<section class="problem {name}" data-count="{count}"><h3>{escape(title)} {mark}</h3>{body}</section>'


def problems_html(problems: Problems, leading: bool, leader: str) -> str:
    """The front page's first section: what needs a person, worst first."""
    now_us, window = problems.now_us, span(problems.window_us)
    failing = table_html(
        ["job", "failed", "of runs ended", "last failure", "last error"],
        [
            [
                f'<a href="{job_href(f.job_id)}">{escape(f.job_id)}</a>',
                f'<span class="failures">{f.failures:,}</span>',
                f"{f.ended:,}",
                f'<a href="{run_href(f.job_id, f.last_failure_us)}">{when(f.last_failure_us, now_us)}</a>',
                escape(f.last_error[:160]) or '<span class="muted">—</span>',
            ]
            for f in problems.failing
        ],
        numeric=frozenset({1, 2}),
        empty=f"no run failed or timed out in the last {window}",
        name="failing",
    )
    if problems.failing_jobs > len(problems.failing):
        failing += f'<p class="muted">and {problems.failing_jobs - len(problems.failing):,} more jobs.</p>'
    known = "" if leading else f" (workers are known to the leader, {escape(leader or 'none known')})"
    waiting = table_html(
        ["target", "due runs waiting", "oldest due", "workers polling it"],
        [
            [
                f"<code>{escape(w.target)}</code>",
                f"{w.due_runs:,}",
                when(w.oldest_due_us, now_us),
                badge_html("none", "bad")
                if w.workers == 0
                else str(w.workers)
                if w.workers is not None
                else '<span class="muted">known on the leader</span>',
            ]
            for w in problems.waiting
        ],
        numeric=frozenset({1}),
        empty="every due run is being taken",
        name="waiting",
    )
    slots = table_html(
        ["job", "slot", "what happened"],
        [
            [
                f'<a href="{job_href(s.job_id)}">{escape(s.job_id)}</a>',
                f'<a href="{run_href(s.job_id, s.scheduled_us)}">{when(s.scheduled_us, now_us)}</a>',
                badge_html(s.fate, "missed" if s.fate == "missed" else "pending") + f" {escape(s.detail)}",
            ]
            for s in problems.bad_slots
        ],
        empty=f"every slot of the last {window} fired within a minute",
        name="bad-slots",
    )
    kinds = ", ".join(f"{n:,} {escape(kind)}" for kind, n in problems.pending_alert_kinds)
    alerts = (
        f'<p><a href="/alerts?pending=1"><span class="pending-alerts">{problems.pending_alerts:,}</span> '
        f"undelivered</a> ({kinds}); the oldest was raised {when(problems.oldest_pending_alert_us, now_us)}. "
        "The leader delivers them: check its log and the owners' webhooks.</p>"
        if problems.pending_alerts
        else '<p class="muted">every alert was delivered</p>'
    )
    kills = table_html(
        ["class", "reason", "by", "since", "until"],
        [
            [
                escape(k.job_class),
                escape(k.reason),
                escape(k.author),
                when(k.killed_us, now_us),
                when(k.until_us, now_us) if k.until_us else "revived by hand",
            ]
            for k in problems.kills
        ],
        empty="no class is killed",
        name="active-kills",
    )
    late_missed = problems.late_slots + problems.missed_slots
    summary = (
        '<p class="all-well">Nothing needs attention.</p>'
        if not problems.count
        else f'<p class="needs-attention">{problems.count} kind(s) of problem need attention.</p>'
    )
    about = (
        f'<p class="muted">Failures, late and missed slots of the last {window} of replicated time, from the '
        f"retained alerts (the newest {ALERTS_RETAINED:,}); a late slot was claimed more than "
        f"{span(LATE_ALERT_US)} after its instant; runs ended counts the newest "
        f"{RUNS_LOOKED_AT_PER_JOB} of the window. A target is listed when no worker polls it, or when its oldest "
        f"due run has waited more than {span(WAITING_AFTER_US)}{known}.</p>"
    )
    return (
        f"{summary}"
        + _section(f"Failing jobs (last {window})", "failing-jobs", problems.failing_jobs, failing)
        + _section("Due runs no worker takes", "unserved-targets", len(problems.waiting), waiting)
        + _section(
            f"Late and missed slots (last {window}: {problems.late_slots:,} late, {problems.missed_slots:,} missed)",
            "late-missed",
            late_missed,
            slots,
        )
        + _section("Undelivered alerts", "undelivered-alerts", problems.pending_alerts, alerts)
        + _section("Active kill switches", "kill-switches", len(problems.kills), kills)
        + about
    )


def workers_page(
    seen: list[WorkerSeen] | None,
    held: dict[str, data.HeldLeases],
    now_us: int,
    leader: str,
    node_id: str = "",
    refresh: bool = True,
) -> str:
    """`seen`: the leader's registry, most recently seen first; None on a node that is not leading."""
    rows = []
    listed = set()
    for worker in seen or []:
        listed.add(worker.holder)
        leases = held.get(worker.holder)
        rows.append(
            [
                f'<span class="worker">{escape(worker.holder)}</span>',
                escape(", ".join(worker.targets))
                if worker.targets
                else '<span class="muted">every target</span>'
                if worker.last_lease_us
                else '<span class="muted">not polled yet</span>',
                f'<span class="leases">{leases.leases if leases else 0}</span>',
                when(worker.last_seen_us, now_us),
                when(worker.last_lease_us, now_us),
                when(worker.last_heartbeat_us, now_us)
                + (
                    f' <span class="muted">({worker.leases_in_heartbeat} leases)</span>'
                    if worker.last_heartbeat_us
                    else ""
                ),
                f"<code>{escape(worker.peer)}</code>" if worker.peer else "—",
                when(worker.first_seen_us, now_us),
            ]
        )
    for holder, leases in sorted(held.items()):
        if holder in listed:
            continue
        rows.append(
            [
                f'<span class="worker">{escape(holder or "(unnamed)")}</span>',
                escape(", ".join(leases.targets)),
                f'<span class="leases">{leases.leases}</span>',
                '<span class="muted">not heard by this node</span>',
                "—",
                "—",
                "—",
                "—",
            ]
        )
    expiry = span(EXPIRE_AFTER_US)
    if seen is None:
        intro = (
            f'<p class="card not-leader">This node is not the leader: workers lease from the leader '
            f"({escape(leader or 'none known')}), so only its dashboard knows who is connected, what they poll "
            "and when it last heard them. Below: the leases each holder has now, from the replicated state.</p>"
        )
    else:
        intro = (
            f'<p class="muted">Workers this leader heard a Lease or Heartbeat call from in the last {expiry} '
            "(kept in its memory only: a new leader starts empty and learns them within a lease poll), "
            "and every holder of a lease now.</p>"
        )
    table = table_html(
        ["worker", "targets", "leases held", "last seen", "last lease poll", "last heartbeat", "address", "first seen"],
        rows,
        numeric=frozenset({2}),
        empty="no worker heard and no lease held",
        name="workers",
    )
    body = intro + table + (refresh_note() if refresh else "")
    return layout("Workers", "/workers", body, node_id, now_us, refresh_s=REFRESH_S if refresh else 0)
