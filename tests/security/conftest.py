"""Probes of the hostile-callers threat model: one or more per finding, each against the real
thing (a node process, its ports, a worker) where the finding is about the real thing. Every
probe asserts the node stays responsive (Status within its deadline, no leader change) and that
nothing was executed or disclosed."""

from tests.integration.conftest import FAST_RAFT, assert_clean_logs, free_port_base, make_cluster  # noqa: F401
