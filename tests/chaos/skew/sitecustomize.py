"""A skewed wall clock for one node process of a clock-skew scenario.

Put this directory first on PYTHONPATH and name a file in RAFTCRON_CHAOS_CLOCK_FILE holding
an offset in seconds: time.time_ns(), the node's wall clock (scheduler/node.py), then reads
the real clock plus that offset, re-read every 0.2 s, so a scenario can skew a node and step
its clock forward. Monotonic clocks are untouched, as with a real NTP step. time.time() is
left alone: gRPC turns Python deadlines into absolute real-time instants, and skewing them
stalls its server. (libfaketime cannot be used either: it breaks timed waits on condition
variables, which every threaded Python program uses.)
"""

import os
import time

_PATH = os.environ.get("RAFTCRON_CHAOS_CLOCK_FILE")

if _PATH:
    _real_time_ns, _monotonic = time.time_ns, time.monotonic
    _cache = {"offset_ns": 0, "read_at": float("-inf")}

    def _offset_ns() -> int:
        now = _monotonic()
        if now - _cache["read_at"] > 0.2:
            try:
                with open(_PATH) as file:
                    _cache["offset_ns"] = int(float(file.read().strip() or 0) * 1e9)
            except (OSError, ValueError):
                pass
            _cache["read_at"] = now
        return _cache["offset_ns"]

    time.time_ns = lambda: _real_time_ns() + _offset_ns()
