"""Dashboard pages for operations: the herd forecast, alerts and kill switches (pure; every value escaped)."""

from __future__ import annotations

from html import escape
from urllib.parse import urlencode

from scheduler.core.alerts import KINDS as ALERT_KINDS
from scheduler.core.model import Alert
from scheduler.core.vocabulary import AlertKind, KillAction
from scheduler.dashboard import data
from scheduler.dashboard.svg import SERIES_COLOURS, forecast_svg, run_href
from scheduler.dashboard.views import badge_html, job_href, layout, pager_html, table_html, to_second, when
from scheduler.planning.runkeys import readable_run_keys_in

# Alert kinds drawn with the `bad` badge.
_BAD_ALERTS = frozenset({AlertKind.FAILED, AlertKind.TIMED_OUT, AlertKind.MISSED, AlertKind.FENCED})


def herd_page(result, computed_at_us: int, hours: float, jobs: int, node_id: str = "") -> str:
    """`result` is a scheduler.forecast.Forecast."""
    series = [("all jobs", result.series())] + [
        (f"uses {name}", result.series(counter)) for name, counter in sorted(result.by_resource.items())
    ]
    peaks = result.peaks(5)
    peak_rows = [[when(at), f'<span class="peak-fires">{fires}</span>'] for at, fires in peaks if fires]
    resource_rows = [
        [escape(name), str(sum(counter.values())), str(max(counter.values(), default=0))]
        for name, counter in sorted(result.by_resource.items())
    ]
    legend = "".join(
        f'<span class="legend-item"><span class="swatch" style="background:{colour}"></span>{escape(name)}</span>'
        for (name, _), colour in zip(series, SERIES_COLOURS * 8)
    )
    truncated = (
        f'<p class="muted">Fires of {len(result.truncated_jobs)} job(s) were capped per job: '
        f"{escape(', '.join(result.truncated_jobs[:10]))}</p>"
        if result.truncated_jobs
        else ""
    )
    body = (
        f'<p class="muted">Fires per minute over the next {hours:g} hours from {escape(to_second(result.start_us))}, '
        f"for {jobs:,} jobs (paused ones left out), with each job's herd spread; computed {when(computed_at_us)}.</p>"
        f'<div class="legend">{legend}</div>'
        f"{forecast_svg(result.start_us, series, peaks[:3])}{truncated}"
        f"<h2>Busiest minutes</h2>{table_html(['minute', 'fires'], peak_rows, numeric=frozenset({1}), empty='nothing fires')}"
        f"<h2>Per resource</h2>{table_html(['resource', 'fires', 'busiest minute'], resource_rows, numeric=frozenset({1, 2}), empty='no job uses a declared resource')}"
    )
    return layout("Herd forecast", "/herd", body, node_id)


def alerts_page(page: data.AlertsPage, pending_only: bool, kind: str, node_id: str = "") -> str:
    filters = ['<a href="/alerts">all</a>', '<a href="/alerts?pending=1">pending only</a>'] + [
        f'<a href="/alerts?{escape(urlencode({"kind": k}))}">{escape(k)}</a>' for k in ALERT_KINDS
    ]
    summary = (
        f'<p>{page.total:,} retained, <span class="pending-count">{page.pending:,}</span> pending delivery; '
        f"showing {'pending ' if pending_only else ''}{escape(kind + ' ') if kind else ''}alerts, newest first "
        f'({page.matching:,}).</p><p class="windows">{" ".join(filters)}</p>'
    )
    rows = [_alert_cells(row.alert, row.has_run, page.now_us) for row in page.alerts]
    table = table_html(
        ["raised", "kind", "job", "owner", "class", "slot", "message", "delivered"], rows, empty="no alerts"
    )
    query = {k: v for k, v in (("pending", "1" if pending_only else ""), ("kind", kind)) if v}
    body = summary + table + pager_html("/alerts", query, page.page, page.matching, data.ALERTS_PAGE_SIZE)
    return layout("Alerts", "/alerts", body, node_id, page.now_us)


def _alert_cells(a: Alert, has_run: bool, now_us: int) -> list[str]:
    slot = escape(to_second(a.scheduled_us))
    return [
        when(a.created_us, now_us),
        badge_html(a.kind, "bad" if a.kind in _BAD_ALERTS else ""),
        f'<a href="{job_href(a.job_id)}">{escape(a.job_id)}</a>',
        escape(a.owner) or '<span class="muted">—</span>',
        escape(a.job_class),
        f'<a href="{run_href(a.job_id, a.scheduled_us)}">{slot}</a>' if has_run else slot,
        escape(readable_run_keys_in(a.message)),
        when(a.delivered_us, now_us) if a.delivered_us else badge_html("pending"),
    ]


def kills_page(page: data.KillsPage, node_id: str = "") -> str:
    active = table_html(
        ["class", "reason", "by", "since", "until", "running runs"],
        [
            [
                f'<a href="/jobs?{escape(urlencode({"q": k.job_class}))}">{escape(k.job_class)}</a>',
                escape(k.reason),
                escape(k.author),
                when(k.killed_us, page.now_us),
                when(k.until_us, page.now_us) if k.until_us else "until revived",
                "cancelled" if k.cancel_running else "left to finish",
            ]
            for k in page.active
        ],
        empty="no class is killed",
        name="kills",
    )
    audit = table_html(
        ["at", "action", "class", "by", "reason", "until"],
        [
            [
                when(r.at_us, page.now_us),
                badge_html(r.action, "killed" if r.action == KillAction.KILL else "succeeded"),
                escape(r.job_class),
                escape(r.author),
                escape(r.reason),
                when(r.until_us) if r.until_us else "—",
            ]
            for r in page.audit
        ],
        empty="no kill switch was ever used",
    )
    note = (
        '<p class="muted">Read-only: <code>raftcron kill CLASS --reason R [--until T]</code> and '
        "<code>raftcron revive CLASS</code> change them.</p>"
    )
    body = f"{note}<h2>Active</h2>{active}<h2>Audit trail</h2>{audit}"
    return layout("Kill switches", "/kills", body, node_id, page.now_us)
