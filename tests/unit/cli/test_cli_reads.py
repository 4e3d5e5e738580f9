"""CLI reads: served by any replica with a freshness note, or confirmed by the leader on request."""

from __future__ import annotations

import contextlib

import pytest

from scheduler import cli
from scheduler.cli import connection
from worker.api.v1 import common_pb2, jobs_pb2


class RecordingClient:
    def __init__(self) -> None:
        self.requests = []

    def list_jobs(self, **fields):
        self.requests.append(fields)
        read = common_pb2.ReadInfo(node_id="n2", applied_index=7, from_leader=fields["linearizable"])
        return jobs_pb2.ListJobsResponse(read=read)


@pytest.mark.parametrize("flag", [False, True])
def test_jobs_reads_linearizably_only_when_asked(monkeypatch, capsys, flag):
    client = RecordingClient()
    monkeypatch.setattr(connection, "cluster_client", lambda args: contextlib.nullcontext(client))
    argv = ["--cluster", "127.0.0.1:7100", "jobs"] + (["--linearizable"] if flag else [])
    assert cli.main(argv) == 0
    assert [r["linearizable"] for r in client.requests] == [flag]
    note = capsys.readouterr().err
    assert ("leader-confirmed" if flag else "local replica") in note
