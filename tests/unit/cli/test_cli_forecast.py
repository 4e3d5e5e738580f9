"""`raftcron forecast`: clock-minute buckets, peaks named by their jobs, the cluster's spreads, the PNG."""

from __future__ import annotations

import contextlib
import importlib.util
import json

from scheduler import cli
from scheduler.cli import connection
from scheduler.core.model import SECOND_US, Job, JobSpec
from scheduler.planning import parse_iso_to_us
from scheduler.rpc.reads import scoped_job_pb
from worker.api.v1 import common_pb2, jobs_pb2

MIDNIGHT_US = parse_iso_to_us("2026-12-03T00:00:00Z")
ARGS = ["--cluster", "127.0.0.1:7100", "forecast", "--start", "2026-12-02T23:50:17Z", "--hours", "2"]


def listed(specs: list[JobSpec]) -> jobs_pb2.ListJobsResponse:
    jobs = [scoped_job_pb(Job.of(spec, 1, "a", 0, MIDNIGHT_US - 3600 * SECOND_US, MIDNIGHT_US)) for spec in specs]
    return jobs_pb2.ListJobsResponse(jobs=jobs, read=common_pb2.ReadInfo(node_id="n1"))


def use_jobs(monkeypatch, specs: list[JobSpec]) -> None:
    client = type("Client", (), {"list_jobs": lambda self, **fields: listed(specs)})()
    monkeypatch.setattr(connection, "cluster_client", lambda args: contextlib.nullcontext(client))


def specs() -> list[JobSpec]:
    pinned = [
        JobSpec(id=f"night.{i}", schedule="0 0 * * *", target_kind="handler", target="h", jitter="pinned")
        for i in range(5)
    ]
    spread = [JobSpec(id=f"report.{i}", schedule="0 0 * * *", target_kind="handler", target="h") for i in range(3)]
    return pinned + spread


def test_peaks_are_clock_minutes_named_by_their_jobs(monkeypatch, capsys):
    use_jobs(monkeypatch, specs())
    assert cli.main(ARGS) == 0
    text = capsys.readouterr().out
    assert "8 fires from 2026-12-02T23:50:00Z for 2 h" in text
    assert "peak 2026-12-03T00:00:00Z  5 fires/min: night.0 (1), night.1 (1), night.2 (1), +2 more" in text


def test_json_peaks_list_their_jobs(monkeypatch, capsys):
    use_jobs(monkeypatch, specs())
    assert cli.main([*ARGS, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["start"] == "2026-12-02T23:50:00Z"
    assert document["peaks"][0]["jobs"][0] == {"job_id": "night.0", "fires": 1}
    assert document["peaks"][0]["more_jobs"] == 2
    assert sum(document["fires_per_minute"]) == 8


def test_herd_window_asks_what_another_window_would_do(monkeypatch, capsys):
    use_jobs(monkeypatch, specs())
    assert cli.main([*ARGS, "--herd-window", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["peaks"][0]["fires"] == 8  # no spread: all at 00:00


def test_png_is_written(monkeypatch, capsys, tmp_path):
    use_jobs(monkeypatch, specs())
    path = tmp_path / "herd.png"
    assert cli.main([*ARGS, "--png", str(path)]) == 0
    assert path.read_bytes()[:4] == b"\x89PNG" and f"plot written to {path}" in capsys.readouterr().out


def test_png_without_matplotlib_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path):
    use_jobs(monkeypatch, specs())
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert cli.main([*ARGS, "--png", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'raftcron[plot]'" in err and "Traceback" not in err


def test_png_into_a_missing_directory_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path):
    use_jobs(monkeypatch, specs())
    assert cli.main([*ARGS, "--png", str(tmp_path / "missing" / "x.png")]) == 2
    err = capsys.readouterr().err
    assert "cannot write into" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
