"""A worker whose token is refused stops with the reason; a cluster that is away is waited for."""

from __future__ import annotations

import threading

import grpc
import pytest

from tests.unit.worker.test_worker_fakes import fake_cluster
from worker import LeaseRefused, Worker
from worker import cli as worker_cli


@pytest.mark.parametrize("code", [grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED])
def test_a_refused_token_stops_run_with_the_reason(code):
    with fake_cluster() as (service, address):
        service.fail_leases = code
        worker = Worker([address], handlers={"reports.build": lambda ctx: None}, credentials=None)
        with pytest.raises(LeaseRefused) as refused:
            worker.run()  # returns (raising) by itself: nothing signals it
    assert refused.value.code == code.name and refused.value.targets == ("reports.build",)
    assert "fake: lease fails on purpose" in str(refused.value) and worker.refused is refused.value
    assert len(service.lease_requests) == 1  # not retried


def test_unavailable_is_retried_not_final():
    with fake_cluster() as (service, address):
        service.fail_leases = grpc.StatusCode.UNAVAILABLE
        worker = Worker([address], handlers={"job": lambda ctx: None})
        runner = threading.Thread(target=worker.run)
        runner.start()
        try:
            assert service.wait_for(lambda: len(service.lease_requests) >= 3, timeout_s=10)
            assert worker.refused is None and runner.is_alive()
        finally:
            worker.stop()
            runner.join(10)


def test_the_worker_command_exits_2_with_the_reason(capsys, monkeypatch):
    monkeypatch.delenv("RAFTCRON_TOKEN", raising=False)
    monkeypatch.delenv("RAFTCRON_TOKEN_FILE", raising=False)
    monkeypatch.delenv("RAFTCRON_CA", raising=False)
    with fake_cluster() as (service, address):
        service.fail_leases = grpc.StatusCode.PERMISSION_DENIED
        status = worker_cli.main(["--cluster", address, "--demo"])
    err = capsys.readouterr().err
    assert status == 2
    assert "raftcron worker: the cluster refused to lease" in err and "PERMISSION_DENIED" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--cluster", "no-port", "--demo"], "invalid address 'no-port'"),
        (["--handlers", "no_such_module_here:HANDLERS"], "No module named 'no_such_module_here'"),
        (["--handlers", "json"], "expected MODULE:ATTR"),
        (["--demo", "--token-file", "/nonexistent/worker.token"], "cannot read RAFTCRON_TOKEN_FILE"),
        ([], "nothing to run"),
    ],
)
def test_worker_command_user_errors_are_one_line(capsys, monkeypatch, argv, message):
    monkeypatch.delenv("RAFTCRON_TOKEN", raising=False)
    monkeypatch.delenv("RAFTCRON_TOKEN_FILE", raising=False)
    assert worker_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
