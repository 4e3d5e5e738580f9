"""`raftcron forecast --png`: the herd forecast drawn as a PNG (matplotlib, the `plot` extra).

The x axis is clock time (UTC), so a peak reads as "00:00" rather than "hours from now", and
the busiest minutes carry the names of the jobs that make them busy.
"""

from __future__ import annotations

from datetime import UTC, datetime

from scheduler.cli.failures import CommandError
from scheduler.planning.forecast import MINUTE_US, Forecast, Peak, peak_text

PEAKS_LABELLED = 3


class PlotError(CommandError, ValueError):
    """No PNG can be written (no matplotlib, an unwritable path): a user error, printed in one
    line by the CLI with exit code 2."""


def check_available(path: str) -> None:
    """Raise PlotError before any work is done, not after a forecast of every job."""
    import importlib.util
    import os

    if importlib.util.find_spec("matplotlib") is None:
        raise PlotError("--png needs matplotlib: pip install 'raftcron[plot]'")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise PlotError(f"--png {path}: cannot write into {folder} (no such directory, or not writable)")


def _clock(at_us: int) -> datetime:
    return datetime.fromtimestamp(at_us / 1_000_000, UTC)


def plot_png(result: Forecast, path: str, peaks: list[Peak] | None = None) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.dates as mdates
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("--png needs matplotlib: pip install 'raftcron[plot]'") from None
    figure, axis = plt.subplots(figsize=(13, 4.8))
    times = [_clock(result.start_us + m * MINUTE_US) for m in range(result.minutes)]
    axis.plot(times, result.series(), label="all jobs", linewidth=1, drawstyle="steps-post")
    for name, counter in sorted(result.by_resource.items()):
        axis.plot(times, result.series(counter), label=f"uses {name}", linewidth=1, drawstyle="steps-post")
    top = max(result.series(), default=0) or 1
    # Each labelled peak gets a numbered marker; the numbers' legend sits in the top-left
    # corner, where it cannot collide with neighbouring peaks or the axis.
    lines = []
    for rank, peak in enumerate((peaks or [])[:PEAKS_LABELLED], start=1):
        at = _clock(peak.at_us)
        axis.plot([at], [peak.fires], marker="o", markersize=4, color="crimson")
        axis.annotate(str(rank), (at, peak.fires), xytext=(0, 5), textcoords="offset points", ha="center", fontsize=9)
        lines.append(f"{rank}. {at:%b %d %H:%M} UTC, {peak.fires} fires: {peak_text(peak)}")
    if lines:
        axis.text(
            0.01,
            0.97,
            "\n".join(lines),
            transform=axis.transAxes,
            va="top",
            fontsize=8,
            bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "0.7"},
        )
    axis.set_ylim(0, top * 1.35)
    locator = mdates.AutoDateLocator(minticks=6, maxticks=14, tz=UTC)
    axis.xaxis.set_major_locator(locator)
    axis.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))
    axis.set_xlim(times[0], _clock(result.start_us + result.minutes * MINUTE_US))
    axis.set_xlabel("time (UTC), one-minute buckets")
    axis.set_ylabel("fires per minute")
    axis.set_title(f"raftcron herd forecast from {times[0]:%Y-%m-%d %H:%M} UTC")
    axis.grid(True, linewidth=0.3)
    axis.legend(loc="upper right")
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=100)
    except OSError as exc:
        raise PlotError(f"--png {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(figure)
