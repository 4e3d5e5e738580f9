"""`raftcron worker` argument handling (the worker itself is tested elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from worker._demo import DEMO_HANDLERS, echo
from worker.cli import DEFAULT_CLUSTER, build_parser, build_worker, load_handlers, main

ROOT = Path(__file__).resolve().parents[3]


def worker_for(*argv: str):
    return build_worker(build_parser().parse_args(list(argv)))


def test_cluster_defaults_to_env_then_local_cluster(monkeypatch) -> None:
    monkeypatch.delenv("RAFTCRON_CLUSTER", raising=False)
    assert build_parser().parse_args([]).cluster == DEFAULT_CLUSTER == "127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203"
    monkeypatch.setenv("RAFTCRON_CLUSTER", "10.0.0.1:7201")
    assert build_parser().parse_args([]).cluster == "10.0.0.1:7201"


def test_options_reach_the_worker() -> None:
    worker = worker_for("--demo", "--shell", "--concurrency", "7", "--worker-id", "w-9", "--cluster", "a:1,b:2")
    assert worker.concurrency == 7 and worker.worker_id == "w-9" and worker.shell
    assert worker.targets == sorted(DEMO_HANDLERS) + ["shell"]


def test_handlers_from_modules() -> None:
    assert load_handlers("worker._demo:DEMO_HANDLERS") == DEMO_HANDLERS
    assert load_handlers("greet=worker._demo:echo") == {"greet": echo}
    worker = worker_for("--handlers", "greet=worker._demo:echo", "examples.payment_job:HANDLERS")
    assert worker.targets == ["greet", "payments.charge"]


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("worker._demo", ValueError),
        ("=worker._demo:echo", ValueError),
        ("worker._demo:echo", ValueError),  # a function needs a NAME=
        ("x=worker._demo:DEMO_HANDLERS", ValueError),  # a dict is not one handler
        ("worker._demo:nope", AttributeError),
        ("no_such_module_here:X", ImportError),
    ],
)
def test_bad_handler_specs(spec: str, error: type) -> None:
    with pytest.raises(error):
        load_handlers(spec)


def test_usage_errors_exit_2(capsys) -> None:
    assert main(["--cluster", "127.0.0.1:7201"]) == 2
    assert "nothing to run" in capsys.readouterr().err
    assert main(["worker", "--demo", "--cluster", "not an address"]) == 2
    assert main(["--handlers", "worker._demo:nope"]) == 2


def test_demo_covers_every_handler_target_of_the_example_jobs() -> None:
    jobs = yaml.safe_load((ROOT / "examples" / "jobs.yaml").read_text())["jobs"]
    handler_targets = set()
    for job in jobs:
        target = job["target"]
        if isinstance(target, str):
            handler_targets.add(target)
        elif "handler" in target:
            handler_targets.add(target["handler"])
    assert handler_targets and handler_targets <= set(DEMO_HANDLERS)


def test_shell_options_reach_the_worker() -> None:
    worker = worker_for("--shell", "--shell-owners", "ops", "finance", "--shell-env", "PGHOST", "PGPORT")
    assert worker.targets == ["shell:ops", "shell:finance"] and worker.shell_env == ("PGHOST", "PGPORT")
    for argv in (["--demo", "--shell-owners", "ops"], ["--shell", "--shell-env", "RAFTCRON_TOKEN"]):
        with pytest.raises(ValueError):
            worker_for(*argv)
    assert main(["--shell", "--shell-user", "no-such-user-here"]) == 2  # a clear error, not a traceback


# A closure: importable by no name, so it cannot run in a handler process.
CLOSURES = {"closure.job": (lambda: lambda ctx: None)()}


def test_thread_handlers_keep_named_handlers_in_threads_under_process_isolation() -> None:
    worker = worker_for("--demo", "--thread-handlers", "demo.echo", "reports.*")
    in_process = set(worker._in_process)
    assert "demo.echo" not in in_process and "reports.build" not in in_process
    assert in_process == set(DEMO_HANDLERS) - {"demo.echo", "reports.build"}
    assert set(worker_for("--demo", "--isolation", "thread")._in_process) == set()


def test_a_closure_under_process_isolation_names_the_flags_that_keep_it_in_a_thread(capsys) -> None:
    handlers = "tests.unit.worker.test_worker_cli:CLOSURES"
    assert main(["--handlers", handlers]) == 2
    err = capsys.readouterr().err
    assert "closure.job" in err and "--thread-handlers closure.job" in err and "--isolation thread" in err
    assert worker_for("--handlers", handlers, "--thread-handlers", "closure.*").targets == ["closure.job"]


def test_a_thread_handlers_pattern_that_names_no_handler_is_refused(capsys) -> None:
    assert main(["--demo", "--thread-handlers", "demo.nope"]) == 2
    assert "--thread-handlers 'demo.nope' names no handler" in capsys.readouterr().err


def test_the_worker_streams_only_when_asked() -> None:
    assert worker_for("--demo").stream is False
    assert worker_for("--demo", "--stream").stream is True
    assert worker_for("--demo", "--stream", "--no-stream").stream is False
