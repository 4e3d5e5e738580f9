"""Make the repository importable when the package is not installed (editable installs also work),
and read zone rules as the nodes do: from the pinned tzdata package only, never from the host."""

import sys
import zoneinfo
from pathlib import Path

zoneinfo.reset_tzpath(to=())

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
