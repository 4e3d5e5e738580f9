"""Dashboard pages as HTML strings (pure: records in, markup out; every value escaped): the shared
layout, the cluster, job list, job and run pages. views_ops.py has the herd, alerts and kills pages."""

from __future__ import annotations

from collections import Counter
from html import escape
from urllib.parse import quote, urlencode

from msgspec import UNSET

from scheduler.core.vocabulary import CompletionKind, Misfire, RunKind, RunStatus, TargetKind
from scheduler.dashboard import data, fates, views_output
from scheduler.dashboard.svg import FATE_COLOURS, legend_html, run_href, timeline_svg
from scheduler.planning import format_us
from scheduler.planning.runkeys import readable_run_key
from scheduler.planning.slot_text import how_it_fires, source_text
from scheduler.planning.slots import is_manual_only, parents_of
from scheduler.planning.timeconv import format_offset

NAV = (
    ("/", "Overview"),
    ("/jobs", "Jobs"),
    ("/workers", "Workers"),
    ("/herd", "Herd"),
    ("/alerts", "Alerts"),
    ("/kills", "Kill switches"),
)
# Badge classes of attempt outcomes; any other (retry later, an expiry, none yet) is drawn as queued.
_OUTCOME_BADGES = {CompletionKind.SUCCESS: "succeeded", CompletionKind.FAILURE: "failed"}
# Timeline windows offered on a job page, ending at replicated now (plus a little to show what is next).
WINDOWS = (("5m", 300), ("1h", 3600), ("6h", 6 * 3600), ("24h", 86400), ("7d", 7 * 86400))

CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1d2330;background:#f4f6f8}
header{background:#1d2330;color:#fff;padding:0 20px;display:flex;align-items:center;gap:24px;height:46px}
header .brand{font-weight:700;letter-spacing:.3px}
header nav a{color:#c9d1de;text-decoration:none;margin-right:16px;padding:13px 0}
header nav a.active{color:#fff;border-bottom:3px solid #4fa3ff}
header .node{margin-left:auto;color:#c9d1de;font-size:12px}
main{padding:18px 20px;max-width:1240px}
h1{font-size:20px;margin:4px 0 12px}
h2{font-size:16px;margin:22px 0 8px}
a{color:#1f63b5}
table{border-collapse:collapse;background:#fff;width:100%;margin-bottom:8px}
th,td{text-align:left;padding:5px 9px;border-bottom:1px solid #e3e6ea;vertical-align:top}
th{background:#eef1f4;font-weight:600;font-size:12px;color:#4a5262}
td.num{text-align:right;font-variant-numeric:tabular-nums}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:3px 16px;background:#fff;padding:10px 14px;margin:0}
dl.facts dt{color:#5b6475}
dl.facts dd{margin:0}
.card{background:#fff;padding:12px 14px;margin-bottom:12px;border:1px solid #e3e6ea}
.muted{color:#6b7385}
.badge{display:inline-block;padding:0 6px;border-radius:9px;font-size:12px;background:#e3e6ea}
.badge.leader{background:#d7ecff;color:#14508f}
.badge.bad,.badge.killed,.badge.failed,.badge.timed_out,.badge.missed{background:#fbdada;color:#8f1414}
.badge.paused,.badge.skipped,.badge.cancelled{background:#eceef1;color:#4a5262}
.badge.succeeded{background:#daf2e0;color:#14662c}
.badge.queued,.badge.leased{background:#dde9fb;color:#14508f}
.badge.pending{background:#fff1c7;color:#7a5800}
form.search{margin-bottom:10px}
form.search input[type=search]{padding:5px 8px;width:320px;border:1px solid #c4cad3}
.pager{margin:8px 0}
.pager a,.pager span{margin-right:12px}
.windows a{margin-right:10px}
.windows a.active{font-weight:700;text-decoration:none;color:#1d2330}
.legend{margin:6px 0 10px}
.legend-item{margin-right:14px;white-space:nowrap}
.swatch{display:inline-block;width:11px;height:11px;border:1px solid #9aa0a8;margin-right:4px;vertical-align:-1px}
pre{background:#1d2330;color:#e6e9ee;padding:10px;overflow:auto;max-height:360px;margin:0}
code{font-size:13px}
svg{max-width:100%;height:auto;background:#fff}
section.problem{background:#fff;border:1px solid #e3e6ea;border-left:4px solid #2e9c4f;padding:6px 12px 8px;margin-bottom:10px}
section.problem:not([data-count="0"]){border-left-color:#c62828}
section.problem h3{font-size:14px;margin:4px 0 6px}
.all-well{color:#14662c;font-weight:600}
.needs-attention{color:#8f1414;font-weight:600}
"""


to_second = fates.to_second


def when(instant_us: int, now_us: int = 0) -> str:
    """An instant as UTC ISO-8601 to the second, with how long ago (or ahead) it is from
    replicated now; its `datetime` attribute keeps the microseconds."""
    if not instant_us:
        return '<span class="muted">—</span>'
    exact, text = format_us(instant_us), to_second(instant_us)
    relative = ""
    if now_us:
        delta = now_us - instant_us
        relative = (
            f' <span class="muted">({fates.human_duration_us(delta)} ago)</span>'
            if delta >= 0
            else (f' <span class="muted">(in {fates.human_duration_us(-delta)})</span>')
        )
    return f'<time datetime="{escape(exact)}">{escape(text)}</time>{relative}'


def job_href(job_id: str, **query) -> str:
    suffix = f"?{urlencode(query)}" if query else ""
    return f"/jobs/{quote(job_id, safe='')}{suffix}"


def badge_html(text: str, kind: str = "") -> str:
    return f'<span class="badge {escape(kind or text)}">{escape(text)}</span>'


def table_html(
    header: list[str], rows: list[list[str]], numeric: frozenset[int] = frozenset(), empty: str = "none", name: str = ""
) -> str:
    """Cells are already markup: callers escape values. `name` becomes the table's class."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    opening = f'<table class="{name}">' if name else "<table>"
    if not rows:
        return (
            f'{opening}<tr>{head}</tr><tr><td colspan="{len(header)}" class="muted">{escape(empty)}</td></tr></table>'
        )
    body = "".join(
        "<tr>"
        + "".join(f"<td{' class=num' if i in numeric else ''}>{cell}</td>" for i, cell in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"{opening}<tr>{head}</tr>{body}</table>"


def _facts(pairs: list[tuple[str, str]]) -> str:
    return '<dl class="facts">' + "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v in pairs) + "</dl>"


def layout(title: str, active: str, body: str, node_id: str = "", now_us: int = 0, refresh_s: int = 0) -> str:
    """`refresh_s`: reload the page this often (a <meta> refresh: the CSP allows no script)."""
    nav = "".join(
        f'<a href="{href}"{" class=active" if href == active else ""}>{escape(label)}</a>' for href, label in NAV
    )
    node = f"node {escape(node_id)}" if node_id else ""
    clock = f" · replicated time {escape(to_second(now_us))}" if now_us else ""
    refresh = f'<meta http-equiv="refresh" content="{refresh_s}">' if refresh_s else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f'<meta name="viewport" content="width=device-width, initial-scale=1">{refresh}'
        f"<title>{escape(title)} · raftcron</title><style>{CSS}</style></head><body>"
        f'<header><span class="brand">raftcron</span><nav>{nav}</nav><span class="node">{node}{clock}</span></header>'
        f"<main><h1>{escape(title)}</h1>{body}</main></body></html>"
    )


def error_page(status: str, message: str, node_id: str = "") -> str:
    return layout(status, "", f'<p class="card">{escape(message)}</p>', node_id)


# -- cluster -------------------------------------------------------------------------------------


def _late_ticks(raft: data.RaftFacts) -> str:
    """A stalled tick thread sends nothing: followers elect someone else after 0.5-1.5 s."""
    if not raft.tick_stalls:
        return "none <span class=muted>(every tick within 0.25 s of the last)</span>"
    longest = f"longest {raft.longest_tick_gap_s:.2f} s"
    return f"{badge_html(f'{raft.tick_stalls:,}', 'bad')} <span class=muted>(0.25 s or more late; {longest})</span>"


def cluster_page(view: data.ClusterPage, problems: str = "", footer: str = "", refresh_s: int = 0) -> str:
    """The front page: `problems` (views_health.problems_html) first, then this node's Raft health."""
    raft, facts = view.raft, view.facts
    lag = raft.commit_index - raft.applied_index
    if view.leaderships:
        epoch, node, term, at_us = view.leaderships[0]
        failover = f"epoch {epoch}: {escape(node)} took over in term {term}, {when(at_us, facts.now_us)}"
    else:
        failover = (
            f"epoch {facts.epoch} opened by {escape(facts.leader_id or 'nobody')} in term {facts.leader_term} "
            '<span class="muted">(before this process started)</span>'
        )
    summary = _facts(
        [
            ("this node", f"{escape(raft.node_id)} {badge_html(raft.role, 'leader' if raft.role == 'leader' else '')}"),
            ("leader", escape(raft.leader) if raft.leader else badge_html("none known", "bad")),
            ("term", str(raft.term)),
            ("commit index", str(raft.commit_index)),
            ("applied index", f"{raft.applied_index} <span class=muted>(lag {lag})</span>"),
            ("late Raft ticks", _late_ticks(raft)),
            ("epoch", f"{facts.epoch} <span class=muted>(opened by {escape(facts.leader_id or '—')})</span>"),
            ("last failover", failover),
            ("replicated time", when(facts.now_us)),
            (
                "clock reading ignored",
                fates.human_duration_us(facts.clock_ignored_us) if facts.clock_ignored_us else "none",
            ),
            ("jobs", f'<a href="/jobs">{facts.jobs:,}</a>'),
            ("runs retained", f"{facts.runs:,} <span class=muted>({facts.leased_runs:,} leased now)</span>"),
            ("kill switches", f'<a href="/kills">{facts.active_kills} active</a>'),
            ("alerts retained", f'<a href="/alerts">{facts.alerts:,}</a>'),
        ]
    )
    peers = table_html(
        ["node", "role", "raft", "gRPC", "connected", "match index", "behind commit"],
        [
            [
                escape(p.node_id) + (' <span class="muted">(this node)</span>' if p.node_id == raft.node_id else ""),
                badge_html("leader", "leader") if p.node_id == raft.leader else "follower" if raft.leader else "?",
                f"<code>{escape(p.raft_address)}</code>",
                f"<code>{escape(p.grpc_address)}</code>",
                "yes" if p.connected else badge_html("no", "bad"),
                str(p.match_index) if p.match_index else '<span class="muted">—</span>',
                str(max(0, raft.commit_index - p.match_index)) if p.match_index else '<span class="muted">—</span>',
            ]
            for p in raft.peers
        ],
        name="peers",
    )
    history = table_html(
        ["epoch", "leader", "term", "at"],
        [[str(e), escape(n), str(t), when(at, facts.now_us)] for e, n, t, at in view.leaderships],
        empty="no leadership change applied since this process started",
    )
    resources = table_html(
        ["resource", "leased now", "max concurrent", "max starts/s"],
        [
            [
                escape(r.name),
                str(facts.resource_leased.get(r.name, 0)),
                str(r.max_concurrent or "∞"),
                str(r.max_starts_per_s or "∞"),
            ]
            for r in facts.resources
        ],
        numeric=frozenset({1, 2, 3}),
        empty="no resources declared",
    )
    note = (
        '<p class="muted">Match indexes are known on the leader; a follower shows its own view. '
        "Each node serves this page from its own replica.</p>"
    )
    body = (
        (f"<h2>Problems</h2>{problems}" if problems else "")
        + f"<h2>Raft health</h2>{summary}<h2>Peers</h2>{peers}{note}"
        f"<h2>Leadership changes</h2>{history}<h2>Resources</h2>{resources}"
    )
    return layout("Overview", "/", body + footer, raft.node_id, facts.now_us, refresh_s)


# -- jobs --------------------------------------------------------------------------------------


def _last_outcome(row: data.JobRow, now_us: int) -> str:
    if not row.last_status:
        return '<span class="muted">never ran</span>'
    return f"{badge_html(row.last_status)} {when(row.last_scheduled_us, now_us)}"


def _state_badges(row: data.JobRow) -> str:
    badges = []
    if row.paused or row.spec.paused:
        badges.append(badge_html("paused"))
    if row.killed:
        badges.append(f'<span class="badge killed" title="{escape(row.killed)}">killed</span>')
    return " ".join(badges) or '<span class="muted">active</span>'


def pager_html(path: str, query: dict, page: int, total: int, page_size: int) -> str:
    pages = max(1, (total + page_size - 1) // page_size)
    links = []
    if page > 0:
        links.append(f'<a rel="prev" href="{path}?{escape(urlencode({**query, "page": page}))}">← previous</a>')
    links.append(f"<span>page {page + 1} of {pages}</span>")
    if page + 1 < pages:
        links.append(f'<a rel="next" href="{path}?{escape(urlencode({**query, "page": page + 2}))}">next →</a>')
    return f'<div class="pager">{"".join(links)}</div>'


def jobs_page(
    rows: list[data.JobRow], query: str, page: int, total: int, page_size: int, now_us: int, node_id: str = ""
) -> str:
    search = (
        '<form class="search" method="get" action="/jobs">'
        f'<input type="search" name="q" value="{escape(query)}" placeholder="job id, owner or class" autofocus> '
        '<button type="submit">Search</button></form>'
    )
    count = f'<p class="muted">{total:,} job{"s" if total != 1 else ""}{" match" if query else ""}</p>'
    table = table_html(
        ["job", "owner", "class", "schedule", "time zone", "next fire", "last outcome", "state"],
        [
            [
                f'<a class="job-link" href="{job_href(row.spec.id)}">{escape(row.spec.id)}</a>',
                escape(row.spec.owner) or '<span class="muted">—</span>',
                escape(row.spec.job_class),
                f"<code>{escape(how_it_fires(row.spec))}</code>",
                escape(row.spec.timezone),
                when(row.next_fire_us, now_us),
                _last_outcome(row, now_us),
                _state_badges(row),
            ]
            for row in rows
        ],
        empty="no job matches" if query else "no jobs",
    )
    pager = pager_html("/jobs", {"q": query} if query else {}, page, total, page_size)
    return layout("Jobs", "/jobs", search + count + table + pager, node_id, now_us)


HIDDEN_DETAIL = '<span class="muted">hidden: shown to the admin and to principals of this job\'s owner</span>'


def _spec_facts(spec, detail: data.JobDetail | None = None, details: bool = True) -> list[tuple[str, str]]:
    retry = spec.retry
    pairs = [
        ("schedule", f"<code>{escape(how_it_fires(spec))}</code> in {escape(spec.timezone)}"),
        ("target", f"{escape(spec.target_kind)}: <code>{escape(spec.target)}</code>"),
        ("owner / class", f"{escape(spec.owner or '—')} / {escape(spec.job_class)}"),
        ("timeout", fates.human_duration_us(spec.timeout_us)),
        (
            "retry",
            f"{retry.max_attempts} attempt(s), backoff {fates.human_duration_us(retry.backoff_initial_us)} "
            f"×{retry.backoff_multiplier:g} up to {fates.human_duration_us(retry.backoff_max_us)}"
            + (f", within {fates.human_duration_us(retry.within_us)}" if retry.within_us else ""),
        ),
        (
            "misfire",
            f"{escape(spec.misfire.policy)}, grace {fates.human_duration_us(spec.misfire.grace_us)}"
            + (f", catch up at most {spec.misfire.max_catch_up}" if spec.misfire.policy == Misfire.CATCH_UP else ""),
        ),
        ("DST", f"gap {escape(spec.dst_gap or 'default')}, repeat {escape(spec.dst_repeat or 'default')}"),
        (
            "jitter",
            escape(spec.jitter) + (f" (this job: +{fates.human_duration_us(detail.spread_us)})" if detail else ""),
        ),
        ("overlap / priority", f"{escape(spec.overlap)} / {spec.priority}"),
        ("uses", escape(", ".join(spec.uses)) or '<span class="muted">—</span>'),
        (
            "payload",
            f"<code>{escape(spec.payload_json)}</code>"
            if spec.payload_json and details
            else HIDDEN_DETAIL
            if spec.payload_json
            else '<span class="muted">—</span>',
        ),
    ]
    return pairs


def _window_links(job_id: str, from_us: int, to_us: int, active: str) -> str:
    links = []
    for label, _ in WINDOWS:
        href = job_href(job_id, window=label)
        links.append(f'<a href="{escape(href)}"{" class=active" if label == active else ""}>last {label}</a>')
    form = (
        f'<form method="get" action="{job_href(job_id)}" style="display:inline;margin-left:14px">'
        f'from <input name="from" value="{escape(format_us(from_us))}" size="22"> '
        f'to <input name="to" value="{escape(format_us(to_us))}" size="22"> <button type="submit">Show</button></form>'
    )
    return f'<div class="windows">{"".join(links)}{form}</div>'


def _next_fires_table(fires: list[data.NextFire], spec, now_us: int, owing: str = "") -> str:
    rows = []
    several = spec.schedules is not UNSET
    for fire in fires:
        marks = []
        if fire.adjustment:
            marks.append(badge_html(fire.adjustment.replace("_", " "), "pending"))
        if fire.calendar:
            marks.append(
                badge_html(f"calendar: {fire.calendar}", "skipped" if fire.calendar == "skipped" else "queued")
                + f' <span class="muted">{escape(fire.calendar_reason)}</span>'
            )
        elif fire.due_us != fire.scheduled_us:
            marks.append(badge_html(f"jitter +{fates.human_duration_us(fire.due_us - fire.scheduled_us)}", "queued"))
        rows.append(
            [
                escape(fire.nominal_local) + f' <span class="muted">{escape(format_offset(fire.utc_offset_s))}</span>',
                when(fire.scheduled_us, now_us),
                when(fire.due_us),
                " ".join(marks) or '<span class="muted">—</span>',
            ]
            + ([escape(source_text(spec, fire.source))] if several else [])
        )
    header = [
        f"wall-clock slot ({spec.timezone})",
        "instant (UTC)",
        "due (UTC, with jitter and calendar)",
        "adjustments",
    ]
    header += ["schedule"] if several else []
    if parents := parents_of(spec):
        empty = f"no slots of its own: runs for a slot of {', '.join(parents)} once their runs of it succeed"
    else:
        empty = "manual-only: runs only when triggered" if is_manual_only(spec) else owing or "never fires again"
    return table_html(header, rows, empty=empty)


def _slot_rows(job_id: str, slots: list[fates.Slot], now_us: int, limit: int = 30) -> str:
    rows = [
        [
            (
                f'<a class="run-link" href="{run_href(job_id, slot.scheduled_us)}">{escape(to_second(slot.scheduled_us))}</a>'
                if slot.has_run
                else escape(to_second(slot.scheduled_us))
            ),
            f'<span class="swatch" style="background:{FATE_COLOURS[slot.fate]}"></span>'
            f'<span class="fate" data-fate="{slot.fate}">{escape(fates.FATE_NAMES[slot.fate])}</span>'
            + (
                f' <span class="muted">({escape(slot.kind)})</span>' if slot.kind not in (RunKind.SCHEDULED, "") else ""
            ),
            escape(slot.detail),
        ]
        for slot in reversed(slots[-limit:])
    ]
    return table_html(["slot", "fate", "what happened"], rows, empty="no slots in this window")


def job_page(
    detail: data.JobDetail,
    slots: list[fates.Slot],
    slots_cut: bool,
    fires: list[data.NextFire],
    from_us: int,
    to_us: int,
    window: str = "",
    node_id: str = "",
    details: bool = True,
) -> str:
    """`details`: whether the caller sees the payload (policy.sees_details)."""
    spec, now_us = detail.row.spec, detail.now_us
    status = _facts(
        [
            (
                "state",
                _state_badges(detail.row)
                + (
                    f' <span class="muted">by {escape(detail.paused_by)}: {escape(detail.paused_reason)}</span>'
                    if detail.row.paused and detail.paused_by
                    else ""
                )
                + (f' <span class="muted">{escape(detail.row.killed)}</span>' if detail.row.killed else ""),
            ),
            ("fires by", escape(how_it_fires(spec))),
            *_chain_facts(parents_of(spec), detail.children),
            ("next fire", when(detail.row.next_fire_us, now_us)),
            *([("owed", escape(detail.owing))] if detail.owing else []),
            ("last outcome", _last_outcome(detail.row, now_us)),
            ("accounted up to", when(detail.cursor_us, now_us)),
            ("runs", f"{detail.retained_runs:,} retained, {detail.live_runs} queued or running"),
            ("version", f"{detail.version} by {escape(detail.author)}, {when(detail.updated_us, now_us)}"),
        ]
    )
    counts = Counter(slot.fate for slot in slots)
    cut = (
        f'<p class="muted">Showing the latest {len(slots)} slots of this window; narrow it to see older ones.</p>'
        if slots_cut
        else ""
    )
    body = (
        f"{status}<h2>Timeline</h2>{_window_links(spec.id, from_us, to_us, window)}"
        f'<p class="muted">{len(slots)} slot(s) from {escape(to_second(from_us))} to {escape(to_second(to_us))}; '
        "hover a square for what happened, click it for the run.</p>"
        f"{legend_html(counts)}{timeline_svg(spec.id, slots)}{cut}"
        f"<h2>Latest slots</h2>{_slot_rows(spec.id, slots, now_us)}"
        f"<h2>Next fires</h2>{_next_fires_table(fires, spec, now_us, detail.owing)}"
        f"<h2>Spec</h2>{_facts(_spec_facts(spec, detail, details))}"
    )
    return layout(f"Job {spec.id}", "/jobs", body, node_id, now_us)


def _job_links(job_ids) -> str:
    return ", ".join(f'<a href="{job_href(job_id)}">{escape(job_id)}</a>' for job_id in job_ids)


def _chain_facts(parents: tuple[str, ...], children: tuple[str, ...]) -> list[tuple[str, str]]:
    """A job's place in a dependency chain: the jobs it runs after, and those that run after it."""
    facts = [("runs after", _job_links(parents))] if parents else []
    return facts + ([("runs before", _job_links(children))] if children else [])


# -- runs --------------------------------------------------------------------------------------


def _run_source(detail: data.RunDetail) -> str:
    """Which entry of `schedules:` produced the run's slot; its expression while the spec is the
    one the run was claimed under."""
    run, spec = detail.run, detail.spec
    index = run.schedule_index
    assert index is not UNSET
    if spec is not None and detail.spec_version == run.spec_version:
        return source_text(spec, index)
    return f"schedules[{index}]"


def _parent_runs_fact(run, spec) -> list[tuple[str, str]]:
    """A dependency run's parents' runs of the same slot (its run key's instant is theirs)."""
    parents = parents_of(spec) if spec is not None else ()
    if run.kind != RunKind.DEPENDENCY or not parents:
        return []
    links = ", ".join(
        f'<a href="{run_href(parent, run.scheduled_us)}">{escape(readable_run_key(parent, run.scheduled_us))}</a>'
        for parent in parents
    )
    return [("parents' runs", links)]


def exit_code_html(run, spec) -> str:
    """A shell command's exit code; a Python handler has none, so its failure shows the error it
    raised (or how the attempt ended) instead of a misleading 0."""
    if run.exit_code:
        return f'<span class="exit-code">{run.exit_code}</span>'
    ended = run.status in (RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.CANCELLED)
    if not ended:
        shell = spec is not None and spec.target_kind == TargetKind.SHELL
        return f'<span class="exit-code">{run.exit_code}</span>' if shell and run.attempts else "—"
    last = run.attempts[-1] if run.attempts else None
    cause = run.error or (last.error if last else "") or (last.outcome if last else "") or run.reason
    return (
        f'<span class="exit-code no-exit-code">none</span> <span class="muted">({escape(cause or run.status)})</span>'
    )


def run_page(detail: data.RunDetail, node_id: str = "", details: bool = True) -> str:
    """`details`: whether the caller sees the output tail (policy.sees_details)."""
    run, now_us = detail.run, detail.now_us
    slot = fates.fate_of(run)
    job_link = (
        f'<a href="{job_href(run.job_id)}">{escape(run.job_id)}</a>'
        if detail.spec
        else f'{escape(run.job_id)} <span class="muted">(deleted; history kept)</span>'
    )
    neighbours = " · ".join(
        link
        for link in (
            f'<a rel="prev" href="{run_href(run.job_id, detail.previous_us)}">← previous run</a>'
            if detail.previous_us
            else "",
            f'<a rel="next" href="{run_href(run.job_id, detail.next_us)}">next run →</a>' if detail.next_us else "",
        )
        if link
    )
    summary = _facts(
        [
            ("job", job_link),
            ("run key", f"<code>{escape(readable_run_key(run.job_id, run.scheduled_us))}</code>"),
            ("slot", when(run.scheduled_us, now_us)),
            ("kind", escape(run.kind)),
            *_parent_runs_fact(run, detail.spec),
            *([("schedule", escape(_run_source(detail)))] if run.schedule_index is not UNSET else []),
            (
                "status",
                f'{badge_html(run.status)} <span class="fate" data-fate="{slot.fate}">{escape(slot.detail)}</span>',
            ),
            ("due", when(run.effective_us or run.scheduled_us, now_us)),
            ("claimed", f"{when(run.claimed_us, now_us)} <span class=muted>(log index {run.claim_index})</span>"),
            ("started", when(run.started_us, now_us)),
            ("finished", when(run.finished_us, now_us)),
            ("attempt", str(run.attempt)),
            ("fencing token", f'<span class="token">{run.fencing_token}</span>' if run.fencing_token else "—"),
            ("worker", escape(run.worker_id) or '<span class="muted">—</span>'),
            ("exit code", exit_code_html(run, detail.spec)),
            ("error", escape(run.error) or '<span class="muted">—</span>'),
            ("lease expires", when(run.lease_expires_us, now_us) if run.status == RunStatus.LEASED else "—"),
            ("deadline", when(run.deadline_us, now_us)),
        ]
    )
    attempts = table_html(
        ["attempt", "worker", "fencing token", "started", "finished", "took", "outcome", "exit code", "error"],
        [
            [
                str(a.number),
                escape(a.worker_id),
                str(a.fencing_token),
                when(a.started_us, now_us),
                when(a.finished_us),
                fates.human_duration_us(a.finished_us - a.started_us) if a.finished_us and a.started_us else "—",
                badge_html(a.outcome or "running", _OUTCOME_BADGES.get(a.outcome, "queued")),
                escape(views_output.ended_by(a))
                if views_output.ended_by(a) and not a.exit_code
                else str(a.exit_code)
                if a.exit_code or a.outcome == CompletionKind.SUCCESS
                else "—",
                escape(a.error),
            ]
            for a in run.attempts
        ],
        numeric=frozenset({0, 2, 7}),
        empty="no attempt started (the slot was accounted without running)",
        name="attempts",
    )
    tail = (
        f"<p>{HIDDEN_DETAIL}</p>"
        if run.output_tail and not details
        else f'<pre class="output-tail">{escape(run.output_tail)}</pre>'
        if run.output_tail
        else '<p class="muted">No output recorded.</p>'
    )
    if views_output.has_attempt_output(run):  # recorded per attempt (log format 3)
        kind = detail.spec.target_kind if detail.spec is not None else ""
        per_attempt = views_output.attempts_output_html(run, kind, details, HIDDEN_DETAIL)
        # The interleaved tail, when the last attempt's streams do not already hold its output.
        last = views_output.has_attempt_output(run, last_only=True)
        rest = "" if last or not run.output_tail else f"<h2>Output tail of the last attempt</h2>{tail}"
        body = f"<p>{neighbours}</p>{summary}<h2>Attempts</h2>{attempts}<h2>Output per attempt</h2>{per_attempt}{rest}"
    else:
        body = f"<p>{neighbours}</p>{summary}<h2>Attempts</h2>{attempts}<h2>Output tail</h2>{tail}"
    return layout(f"Run {run.job_id} @ {to_second(run.scheduled_us)}", "/jobs", body, node_id, now_us)
