"""WorkerService.Complete: the node bounds each stream to its output_tail_bytes, and a cluster
below log format 3 gets the completion without the per-attempt fields (its combined tail kept)."""

from __future__ import annotations

import pytest
from msgspec import UNSET

from scheduler.core.commands import CompleteRuns
from scheduler.core.state import State
from scheduler.rpc.workers import WorkerServicer
from tests.fakes import ImmediateRaftLog
from tests.unit.rpc.test_rpc_errors import FakeContext
from worker.api.v1 import worker_pb2 as wpb


class RecordingLog(ImmediateRaftLog):
    def __init__(self, cluster_version: int) -> None:
        super().__init__(State(cluster_version=cluster_version))
        self.proposed: list = []

    def submit(self, command, timeout_s: float):
        self.proposed.append(command)
        return self.apply(command)


def _complete(cluster_version: int, output_tail_bytes: int = 4096):
    log = RecordingLog(cluster_version)
    servicer = WorkerServicer(log, lambda: None, None, lambda: 1, 5.0, 1.0, output_tail_bytes=output_tail_bytes)
    request = wpb.CompleteRequest(
        worker_id="w",
        lease=wpb.LeaseRef(job_id="a", fencing_token=7),
        kind=wpb.FAILURE,
        output_tail="both",
        stdout_tail="o" * 5000 + "END",
        stderr_tail="err",
        exception_type="KeyError",
    )
    try:
        servicer.Complete(request, FakeContext())
    finally:
        servicer.close()
    (command,) = [c for c in log.proposed if isinstance(c, CompleteRuns)]
    return command.completions[0]


@pytest.mark.parametrize("limit", [4096, 100])
def test_each_stream_is_cut_to_the_nodes_limit(limit: int) -> None:
    completion = _complete(cluster_version=3, output_tail_bytes=limit)
    assert completion.stdout_tail == ("o" * 5000 + "END")[-limit:]
    assert (completion.stderr_tail, completion.exception_type) == ("err", "KeyError")


def test_below_format_3_only_the_combined_tail_is_proposed() -> None:
    completion = _complete(cluster_version=2)
    assert (completion.stdout_tail, completion.stderr_tail, completion.exception_type) == (UNSET, UNSET, UNSET)
    assert completion.output_tail == "both"
