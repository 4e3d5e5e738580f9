"""Charts drawn by the server as inline SVG: a job's slot timeline and the herd forecast (pure).

Colours are set on the shapes themselves, so a chart saved on its own looks the same; every
text is escaped.
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from scheduler.dashboard.fates import FATE_NAMES, Slot, to_second
from scheduler.planning import format_us

FATE_COLOURS = {
    "on_time": "#2e9d4b",
    "late": "#e0a100",
    "retried": "#7fb800",
    "failed": "#d2322d",
    "timed_out": "#9c1f6e",
    "skipped": "#8a8f98",
    "missed": "#111111",
    "cancelled": "#b9bec6",
    "running": "#2f7ed8",
    "queued": "#9cc3f0",
    "upcoming": "#ffffff",
    "unrecorded": "#eceef1",
}
SERIES_COLOURS = ("#2f7ed8", "#d2322d", "#2e9d4b", "#e0a100", "#9c1f6e", "#00a3a3", "#6b4fbb")

CELL_PX = 14
GAP_PX = 3
CELLS_PER_ROW = 50
LABEL_PX = 150


def run_href(job_id: str, scheduled_us: int) -> str:
    return f"/runs/{quote(job_id, safe='')}/{scheduled_us}"


def timeline_svg(job_id: str, slots: list[Slot]) -> str:
    """One square per slot, oldest first, rows of CELLS_PER_ROW; a slot with a run links to it."""
    if not slots:
        return '<p class="muted">No slots in this window.</p>'
    rows = (len(slots) + CELLS_PER_ROW - 1) // CELLS_PER_ROW
    width = LABEL_PX + CELLS_PER_ROW * (CELL_PX + GAP_PX)
    height = rows * (CELL_PX + GAP_PX) + GAP_PX
    parts = [
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="slot timeline of {escape(job_id)}">'
    ]
    for i, slot in enumerate(slots):
        row, column = divmod(i, CELLS_PER_ROW)
        y = GAP_PX + row * (CELL_PX + GAP_PX)
        if column == 0:
            parts.append(
                f'<text x="0" y="{y + CELL_PX - 3}" font-size="11" fill="#555">{escape(to_second(slot.scheduled_us))}</text>'
            )
        x = LABEL_PX + column * (CELL_PX + GAP_PX)
        tooltip = f"{to_second(slot.scheduled_us)}: {slot.detail}"
        rect = (
            f'<rect class="slot fate-{slot.fate}" data-fate="{slot.fate}" data-slot="{slot.scheduled_us}" '
            f'x="{x}" y="{y}" width="{CELL_PX}" height="{CELL_PX}" rx="2" fill="{FATE_COLOURS[slot.fate]}" '
            f'stroke="#9aa0a8" stroke-width="{1 if slot.fate in ("upcoming", "unrecorded") else 0}">'
            f"<title>{escape(tooltip)}</title></rect>"
        )
        parts.append(f'<a href="{run_href(job_id, slot.scheduled_us)}">{rect}</a>' if slot.has_run else rect)
    parts.append("</svg>")
    return "".join(parts)


def legend_html(counts: dict[str, int]) -> str:
    """The fates present, with their colour and count."""
    items = [
        f'<span class="legend-item" data-fate="{fate}"><span class="swatch" style="background:{FATE_COLOURS[fate]}">'
        f'</span>{escape(FATE_NAMES[fate])} <b class="count">{counts[fate]}</b></span>'
        for fate in FATE_NAMES
        if counts.get(fate)
    ]
    return f'<div class="legend">{"".join(items)}</div>'


def _nice_ceiling(value: int) -> int:
    """The axis top: 1, 2 or 5 times a power of ten, at least `value`."""
    magnitude = 1
    while True:
        for step in (1, 2, 5):
            if step * magnitude >= value:
                return step * magnitude
        magnitude *= 10


def forecast_svg(start_us: int, series: list[tuple[str, list[int]]], peaks: list[tuple[int, int]]) -> str:
    """Fires per minute: one line per series (the first is all jobs), ticks every two hours."""
    width, height = 1000, 280
    left, right, top, bottom = 50, 30, 14, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    minutes = max((len(values) for _, values in series), default=0) or 1
    top_value = _nice_ceiling(max((max(values, default=0) for _, values in series), default=0) or 1)

    def x_of(minute: float) -> float:
        return left + plot_w * minute / max(1, minutes - 1)

    def y_of(value: float) -> float:
        return top + plot_h * (1 - value / top_value)

    parts = [
        f'<svg class="forecast" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="fires per minute forecast">',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafbfc" stroke="#d0d4da"/>',
    ]
    for fraction in (0, 0.5, 1):
        value = top_value * fraction
        y = y_of(value)
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e6ea"/>')
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end" fill="#555">{value:g}</text>'
        )
    for minute in range(0, minutes + 1, 120):
        x = x_of(min(minute, minutes - 1))
        label = format_us(start_us + minute * 60_000_000)[11:16]
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top + plot_h}" y2="{top + plot_h + 4}" stroke="#888"/>')
        parts.append(
            f'<text x="{x:.1f}" y="{top + plot_h + 16}" font-size="11" text-anchor="middle" fill="#555">+{minute // 60}h</text>'
            f'<text x="{x:.1f}" y="{top + plot_h + 29}" font-size="10" text-anchor="middle" fill="#888">{label}Z</text>'
        )
    for i, (name, values) in enumerate(series):
        colour = SERIES_COLOURS[i % len(SERIES_COLOURS)]
        points = " ".join(f"{x_of(m):.1f},{y_of(v):.1f}" for m, v in enumerate(values))
        parts.append(
            f'<polyline class="series" data-series="{escape(name)}" fill="none" stroke="{colour}" '
            f'stroke-width="{1.6 if i == 0 else 1.2}" points="{points}"><title>{escape(name)}</title></polyline>'
        )
    for at_us, fires in peaks:
        minute = (at_us - start_us) // 60_000_000
        x, y = x_of(minute), y_of(fires)
        parts.append(
            f'<circle class="peak" cx="{x:.1f}" cy="{y:.1f}" r="3" fill="#d2322d">'
            f"<title>{escape(to_second(at_us))}: {fires} fires</title></circle>"
            f'<text x="{x + 5:.1f}" y="{max(top + 10, y - 4):.1f}" font-size="11" fill="#d2322d">{fires}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
