"""`raftcron forecast --plot`: the herd forecast drawn as a PNG (matplotlib, the `plot` extra)."""

from __future__ import annotations

from scheduler.cli.failures import CommandError
from scheduler.planning.forecast import MINUTE_US, Forecast


def plot_png(result: Forecast, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CommandError(
            "--plot needs matplotlib, which the `plot` extra installs: pip install 'raftcron[plot]'"
        ) from None
    figure, axis = plt.subplots(figsize=(12, 4))
    hours = [m / 60 for m in range(result.minutes)]
    axis.plot(hours, result.series(), label="all jobs", linewidth=1)
    for name, counter in sorted(result.by_resource.items()):
        axis.plot(hours, result.series(counter), label=f"uses {name}", linewidth=1)
    for at, fires in result.peaks(3):
        axis.annotate(f"{fires}", ((at - result.start_us) / MINUTE_US / 60, fires), fontsize=8)
    axis.set_xlabel("hours from now")
    axis.set_ylabel("fires per minute")
    axis.set_title("raftcron herd forecast")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
