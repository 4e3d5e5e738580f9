"""Python's cyclic garbage collector on a long-running node: fewer, cheaper full collections.

With CPython's defaults (thresholds 700, 10, 10) a busy leader ran a full collection every
couple of seconds, each walking every tracked object of the process (110,000-170,000 during
`bench execution`'s cycles), for 40-80 ms holding the GIL: the Raft tick thread waited behind
it, and so did every commit. The replicated records are untracked already (`gc=False`, see
core/model.py); what the collector walked was the modules' own objects and the request
machinery around them. So the node:

- freezes what exists once the node is built (modules, classes, configuration): those objects
  live as long as the process, and a full collection no longer walks them;
- collects the youngest generation every 50,000 net allocations instead of 700. Garbage without
  a cycle is freed by reference counting whatever the thresholds; these only decide how soon
  cyclic garbage goes, and a young cycle still goes at the next young collection.

`RAFTCRON_GC_THRESHOLDS` (three integers, `700,10,10` for CPython's own; `off` to leave the
collector as Python set it, freeze included) overrides the thresholds. See
docs/design/node-garbage-collector.md for the measurements.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping
from dataclasses import dataclass

ENVIRONMENT_VARIABLE = "RAFTCRON_GC_THRESHOLDS"


@dataclass(frozen=True)
class CollectorSettings:
    thresholds: tuple[int, int, int] = (50_000, 10, 10)
    freeze: bool = True


def collector_settings(environ: Mapping[str, str] = os.environ) -> CollectorSettings | None:
    """The settings to apply; None to leave the collector alone. ValueError for a bad variable."""
    text = environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if not text:
        return CollectorSettings()
    if text.lower() == "off":
        return None
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 3 or not all(part.isdigit() for part in parts) or int(parts[0]) < 1:
        raise ValueError(
            f"{ENVIRONMENT_VARIABLE}={text!r}: expected three whole numbers such as 50000,10,10 "
            "(the first at least 1), or 'off'"
        )
    first, second, third = (int(part) for part in parts)
    return CollectorSettings(thresholds=(first, second, third))


def tune_collector(settings: CollectorSettings | None) -> dict[str, object]:
    """Apply `settings` (None: nothing); what was applied. Call it once the node is built and
    before it serves: the freeze keeps what exists then out of every later collection."""
    if settings is None:
        return {}
    gc.set_threshold(*settings.thresholds)
    applied: dict[str, object] = {"thresholds": settings.thresholds}
    if settings.freeze:
        gc.collect()  # what is garbage now must not be frozen with the rest
        gc.freeze()
        applied["frozen_objects"] = gc.get_freeze_count()
    return applied
