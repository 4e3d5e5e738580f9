"""`python -m scheduler.cli`: how node processes and workers are started without the entry point."""

import sys

from scheduler.cli import main

sys.exit(main())
