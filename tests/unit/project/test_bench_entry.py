"""`python -m bench all`: its help runs nothing, and Ctrl-C stops the whole run."""

from __future__ import annotations

import signal
import sys
import types

import pytest

from bench import __main__ as bench_main


@pytest.fixture
def fake_benchmarks(monkeypatch):
    """Two benchmark modules that record their runs; the first can be made to see a Ctrl-C."""
    ran: list[str] = []
    behaviour = {"first": "ok"}

    def first_main(argv):
        ran.append("first")
        if behaviour["first"] == "interrupted-and-cleaned-up":
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                return 0  # a benchmark that cleans up and returns as if nothing happened
        return 0

    def second_main(argv):
        ran.append("second")
        return 0

    for name, main in (("first", first_main), ("second", second_main)):
        module = types.ModuleType(f"fake_bench_{name}")
        module.main = main
        monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(bench_main, "BENCHMARKS", {"first": "fake_bench_first", "second": "fake_bench_second"})
    return ran, behaviour


def test_all_help_runs_no_benchmark(fake_benchmarks, capsys) -> None:
    ran, _ = fake_benchmarks
    assert bench_main.main(["all", "--help"]) == 0
    assert ran == []
    assert "usage: python -m bench all" in capsys.readouterr().err


def test_all_refuses_an_option_it_would_not_pass_on(fake_benchmarks, capsys) -> None:
    ran, _ = fake_benchmarks
    assert bench_main.main(["all", "--jobs", "3"]) == 2
    assert ran == []
    assert "unknown option(s) --jobs 3" in capsys.readouterr().err


def test_all_runs_each_benchmark_in_turn(fake_benchmarks) -> None:
    ran, _ = fake_benchmarks
    assert bench_main.main(["all", "--quick"]) == 0
    assert ran == ["first", "second"]


def test_ctrl_c_stops_the_run_even_when_a_benchmark_swallows_it(fake_benchmarks) -> None:
    ran, behaviour = fake_benchmarks
    behaviour["first"] = "interrupted-and-cleaned-up"
    # What the run found (Python's default, or "ignored" when started in the background).
    before = signal.getsignal(signal.SIGINT)
    assert bench_main.main(["all"]) == 130
    assert ran == ["first"]
    assert signal.getsignal(signal.SIGINT) is before
