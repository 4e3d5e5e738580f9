"""Make the repository importable when the package is not installed (editable installs also work),
and read zone rules as the nodes do: from the pinned tzdata package only, never from the host."""

import sys
import zoneinfo
from pathlib import Path

zoneinfo.reset_tzpath(to=())

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# The tests that start processes run in two lanes when pytest-xdist runs them (scripts/test.sh):
# the chaos scenarios, each in a private network namespace, and everything else on the host's
# loopback. A lane is one xdist group, so it runs on one worker, one test at a time: no two
# loopback tests race for ports, and no two chaos scenarios share the CPU with each other.
_CHAOS = str(Path(ROOT) / "tests" / "chaos")


def pytest_collection_modifyitems(config, items):
    import pytest

    for item in items:
        lane = "chaos" if str(item.path).startswith(_CHAOS) else "loopback"
        item.add_marker(pytest.mark.xdist_group(lane))
