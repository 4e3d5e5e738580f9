"""A user's mistake is one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import contextlib
import io
import socket
import subprocess
import sys

import grpc
import pytest

from scheduler import cli
from scheduler.cli import connection
from scheduler.cli.failures import rpc_error_line
from worker.api.v1 import common_pb2, jobs_pb2


class Refused(grpc.RpcError):
    """What a real call raises when the node answers with a status."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


class RefusingClient:
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self.error = Refused(code, details)

    def __getattr__(self, name):
        def call(*args, **kwargs):
            raise self.error

        return call


class EmptyCluster:
    def list_jobs(self, **fields):
        return jobs_pb2.ListJobsResponse(read=common_pb2.ReadInfo(node_id="n1"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def files(tmp_path):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("jobs: [\n  - id: x\n")
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text(
        'jobs:\n  - id: x\n    schedule: "0 2 * * *"\n    target: {handler: a}\n    timezone: Mars/Olympus\n'
    )
    not_utf8 = tmp_path / "latin1.yaml"
    not_utf8.write_bytes(b"jobs: []\n# caf\xe9\n")
    return {"dir": str(tmp_path), "bad": str(bad_yaml), "invalid": str(invalid), "latin1": str(not_utf8)}


USER_ERRORS = [
    (
        "missing file",
        ["plan", "-f", "{dir}/missing.yaml"],
        "cannot read the jobs file {dir}/missing.yaml: No such file",
    ),
    ("a directory for a file", ["apply", "-f", "{dir}"], "cannot read the jobs file {dir}: Is a directory"),
    ("YAML syntax", ["apply", "-f", "{bad}"], "YAML syntax error"),
    ("invalid spec", ["plan", "-f", "{invalid}"], "job 'x' field 'timezone'"),
    ("not UTF-8", ["plan", "-f", "{latin1}"], "is not UTF-8"),
    ("bad instant", ["runs", "payroll", "--since", "the day before"], "is not a time"),
    ("bad instant for a kill", ["kill", "reports", "--reason", "r", "--until", "soonish"], "is not a time"),
    ("bad cron", ["next", "--schedule", "61 * * * *"], "61"),
    ("bad cluster list", ["--cluster", "no-port", "jobs"], "invalid address 'no-port'"),
    ("missing token file", ["jobs", "--token-file", "{dir}/none.token"], "cannot read RAFTCRON_TOKEN_FILE"),
    ("missing CA", ["jobs", "--ca", "{dir}/none.pem"], "cannot read"),
    ("bad run key", ["runs", "payroll@soon"], "'soon' is not an ISO-8601 instant"),
    ("explain without an instant", ["explain", "payroll"], "explain needs --at TIME, or a run key"),
    ("explain with both", ["explain", "payroll@1796151540000000", "--at", "now"], "not both"),
]


@pytest.mark.parametrize(("name", "argv", "message"), USER_ERRORS, ids=[case[0] for case in USER_ERRORS])
def test_user_errors_are_one_line_and_exit_2(monkeypatch, capsys, files, name, argv, message):
    monkeypatch.delenv("RAFTCRON_TOKEN", raising=False)
    monkeypatch.delenv("RAFTCRON_TOKEN_FILE", raising=False)
    monkeypatch.delenv("RAFTCRON_CA", raising=False)
    argv = [arg.format(**files) for arg in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert message.format(**files) in err
    if name != "invalid spec":  # a spec's problems are listed one per line, all of them
        assert len(err.strip().splitlines()) == 1, err


def test_yaml_error_on_standard_input(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"jobs: [\n")))
    assert cli.main(["plan", "-f", "-"]) == 2
    assert "<stdin>:2:1: YAML syntax error" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (
            grpc.StatusCode.UNAUTHENTICATED,
            "the cluster refused the token (UNAUTHENTICATED: bad token); check --token-file or RAFTCRON_TOKEN",
        ),
        (grpc.StatusCode.PERMISSION_DENIED, "the token's role may not do this (PERMISSION_DENIED: bad token)"),
        (grpc.StatusCode.NOT_FOUND, "NOT_FOUND: bad token"),
        (grpc.StatusCode.FAILED_PRECONDITION, "FAILED_PRECONDITION: bad token"),
    ],
)
def test_a_refused_request_is_one_line_and_exit_2(monkeypatch, capsys, code, expected):
    client = RefusingClient(code, "bad token")
    monkeypatch.setattr(connection, "cluster_client", lambda args: contextlib.nullcontext(client))
    assert cli.main(["pause", "payroll"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"raftcron pause: {expected}"


def test_an_internal_fault_of_the_cluster_is_exit_1(monkeypatch, capsys):
    client = RefusingClient(grpc.StatusCode.INTERNAL, "boom")
    monkeypatch.setattr(connection, "cluster_client", lambda args: contextlib.nullcontext(client))
    assert cli.main(["jobs"]) == 1
    assert capsys.readouterr().err.strip() == "raftcron jobs: INTERNAL: boom"


def test_unreachable_cluster(capsys):
    address = f"127.0.0.1:{free_port()}"
    assert cli.main(["jobs", "--cluster", address, "--timeout", "2"]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach the cluster at {address} (UNAVAILABLE" in err and "Traceback" not in err


def test_missing_matplotlib_names_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    monkeypatch.setattr(connection, "cluster_client", lambda args: contextlib.nullcontext(EmptyCluster()))
    assert cli.main(["forecast", "--plot", "herd.png"]) == 2
    assert "pip install 'raftcron[plot]'" in capsys.readouterr().err


def test_deadline_line_suggests_a_longer_timeout():
    line, status = rpc_error_line(Refused(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"), "a:1")
    assert (status, "raise --timeout" in line) == (2, True)


@pytest.mark.parametrize(
    "argv",
    [["plan", "-f", "/nonexistent/jobs.yaml"], ["runs", "--since", "never"], ["--cluster", "x", "jobs"]],
)
def test_user_errors_in_a_real_process(argv):
    done = subprocess.run([sys.executable, "-m", "scheduler.cli", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize("value", ["-1", "0", "inf", "soon"])
def test_a_bad_timeout_is_a_usage_error(capsys, value):
    with pytest.raises(SystemExit) as exited:
        cli.main(["jobs", f"--timeout={value}"])
    assert exited.value.code == 2
    assert "is not a positive number of seconds" in capsys.readouterr().err


def test_a_file_that_cannot_be_written_is_named(monkeypatch, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(connection, "cluster_client", lambda args: contextlib.nullcontext(EmptyCluster()))
    target = tmp_path / "no-such-dir" / "herd.png"
    assert cli.main(["forecast", "--plot", str(target)]) == 2
    err = capsys.readouterr().err
    assert (
        str(target) in err
        and ("No such file or directory" in err or "no such directory" in err)
        and "Traceback" not in err
    )
