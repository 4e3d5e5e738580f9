"""Global options before or after the command, `--version`, and `-f -`."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from importlib.metadata import version

import pytest

from scheduler import cli
from scheduler.cli import connection, jobs
from scheduler.cli.parser import DEFAULT_CLUSTER, build_parser
from worker.api.v1 import common_pb2, jobs_pb2


@pytest.mark.parametrize(
    ("argv", "cluster", "timeout", "token_file", "insecure"),
    [
        (["runs", "x"], DEFAULT_CLUSTER, 10.0, None, False),
        (["--cluster", "a:1", "--timeout", "3", "--token-file", "t", "--insecure", "runs", "x"], "a:1", 3.0, "t", True),
        (["runs", "x", "--cluster", "b:1", "--timeout", "4", "--token-file", "u", "--insecure"], "b:1", 4.0, "u", True),
        # Given on both sides, the one after the command wins; one side's value survives the other's absence.
        (["--cluster", "a:1", "runs", "x", "--cluster", "b:1"], "b:1", 10.0, None, False),
        (["--cluster", "a:1", "--timeout", "3", "runs", "x", "--token-file", "u"], "a:1", 3.0, "u", False),
        (["--cluster", "a:1", "cluster", "remove", "n3"], "a:1", 10.0, None, False),
        (["cluster", "remove", "n3", "--cluster", "b:1"], "b:1", 10.0, None, False),
    ],
)
def test_global_options_before_or_after_the_command(monkeypatch, argv, cluster, timeout, token_file, insecure):
    monkeypatch.delenv("RAFTCRON_CLUSTER", raising=False)
    args = build_parser().parse_args(argv)
    assert (args.cluster, args.timeout, args.token_file, args.insecure) == (cluster, timeout, token_file, insecure)


def test_every_cluster_command_takes_the_global_options_after_its_name():
    parser = build_parser()
    subcommands = next(a for a in parser._actions if a.dest == "command").choices
    for name, sub in subcommands.items():
        if name in ("serve", "dev", "credentials", "worker"):
            continue
        flags = {option for action in sub._actions for option in action.option_strings}
        assert {"--cluster", "--timeout", "--ca", "--token-file", "--insecure"} <= flags, name


def test_version_is_the_installed_packages(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"raftcron {version('raftcron')}"


def test_version_from_the_entry_module():
    done = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", "--version"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip()) == (0, f"raftcron {version('raftcron')}")


JOBS_YAML = b"""\
jobs:
  - id: nightly
    schedule: "0 2 * * *"
    target: {handler: reports.build}
"""


def test_dash_reads_the_jobs_file_from_standard_input():
    document = jobs.read_job_document("-", stdin=io.BytesIO(JOBS_YAML))
    assert [spec.id for spec in document.jobs] == ["nightly"]


def test_apply_dash_sends_what_standard_input_holds(monkeypatch, capsys):
    sent = []

    class Client:
        def apply_jobs(self, request):
            sent.append(request)
            return jobs_pb2.ApplyJobsResponse(
                changes=[common_pb2.JobChange(job_id="nightly", change="added", version=1)], applied_index=9
            )

    monkeypatch.setattr(connection, "cluster_client", lambda args: contextlib.nullcontext(Client()))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(JOBS_YAML)))
    assert cli.main(["apply", "-f", "-"]) == 0
    assert [job.id for job in sent[0].jobs] == ["nightly"]
    assert "added  nightly" in capsys.readouterr().out


def test_runs_of_a_run_key_reads_that_one_run(monkeypatch, capsys):
    from worker.api.v1 import runs_pb2

    asked = []

    class Client:
        def get_run(self, **fields):
            asked.append(fields)
            return runs_pb2.GetRunResponse(run=common_pb2.Run(job_id="payroll"), read=common_pb2.ReadInfo(node_id="n1"))

    monkeypatch.setattr(connection, "cluster_client", lambda args: contextlib.nullcontext(Client()))
    for key in ("payroll@2026-12-01T18:59:00Z", "payroll@1796151540000000"):
        assert cli.main(["runs", key]) == 0
    assert [(a["job_id"], a["scheduled_at"].seconds) for a in asked] == [("payroll", 1_796_151_540)] * 2
    assert "payroll" in capsys.readouterr().out


def test_explain_takes_a_run_key_for_job_and_at(monkeypatch):
    from scheduler.cli import runs

    seen = []
    monkeypatch.setattr(runs, "cmd_explain", lambda args: seen.append((args.job, args.at)) or 0)
    assert cli.main(["explain", "payroll@1796151540000000"]) == 0
    assert seen == [("payroll", "2026-12-01T18:59:00Z")]
