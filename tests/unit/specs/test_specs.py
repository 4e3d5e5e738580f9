"""Job files -> validated JobSpecs: every rule, all-or-nothing, and the way back to documents."""

from __future__ import annotations

import json
import math
import sys
import time
import unicodedata
from pathlib import Path

import msgspec
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler import specs
from scheduler.core.model import SECOND_US, JobSpec, MisfirePolicy, RetryPolicy
from scheduler.planning.durations import DurationError
from scheduler.specs import (
    SpecError,
    SpecProblem,
    canonical_payload_json,
    format_duration_us,
    load_jobs_file,
    parse_duration_us,
    parse_jobs_document,
    spec_to_document,
    validate_spec,
)
from scheduler.specs.problems import _short
from scheduler.specs.reader import _JOB_KEYS
from scheduler.specs.rules import _CONTROL_OR_SURROGATE, text_problem

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "jobs.yaml"
MINUTE_US = 60 * SECOND_US
HOUR_US = 60 * MINUTE_US
DAY_US = 24 * HOUR_US
DROP = object()  # a field value meaning "leave the key out"


def job(**fields: object) -> dict[str, object]:
    document: dict[str, object] = {"id": "j", "schedule": "0 * * * *", "target": "demo.echo"}
    document.update(fields)
    return {key: value for key, value in document.items() if value is not DROP}


def parse(*jobs: dict[str, object]) -> list[JobSpec]:
    return parse_jobs_document(yaml.safe_dump({"jobs": list(jobs)}))


def one(**fields: object) -> JobSpec:
    (spec,) = parse(job(**fields))
    return spec


def problems_of(text: str) -> list[SpecProblem]:
    with pytest.raises(SpecError) as caught:
        parse_jobs_document(text)
    assert caught.value.problems, "a SpecError always lists its problems"
    return caught.value.problems


def problems(*jobs: dict[str, object]) -> list[SpecProblem]:
    return problems_of(yaml.safe_dump({"jobs": list(jobs)}))


def problem(**fields: object) -> SpecProblem:
    """The single problem of a job `j` with `fields`; the message names job and field."""
    found = problems(job(**fields))
    assert len(found) == 1, found
    assert found[0].job_id == "j"
    return found[0]


def spec(**fields: object) -> JobSpec:
    base: dict[str, object] = {"id": "j", "schedule": "0 * * * *", "target_kind": "handler"}
    base.update({"target": "h"}, **fields)
    return JobSpec(**base)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Durations
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "us"),
    [
        ("90s", 90 * SECOND_US),
        ("10m", 10 * MINUTE_US),
        ("1h30m", 90 * MINUTE_US),
        ("2d", 2 * DAY_US),
        ("500ms", 500_000),
        ("250us", 250),
        ("1d2h3m4s5ms6us", DAY_US + 2 * HOUR_US + 3 * MINUTE_US + 4 * SECOND_US + 5006),
        ("0s", 0),
        ("0", 0),
        ("90", 90 * SECOND_US),
        (90, 90 * SECOND_US),
        (0, 0),
    ],
)
def test_parse_duration(text: object, us: int) -> None:
    assert parse_duration_us(text, "timeout") == us


@pytest.mark.parametrize(
    "value",
    [True, False, -1, 1.5, 90.0, math.inf, "1.5h", "", " 10s", "10s ", "10x", "10M", "s",
     "30m1h", "1h1h", "1m1m", "-5s", "١٠s", "10 s", None, [], {}, "9" * 40 + "d", "9" * 40],
)  # fmt: skip
def test_parse_duration_rejects(value: object) -> None:
    with pytest.raises(DurationError) as caught:
        parse_duration_us(value, "retry.within")
    assert caught.value.field == "retry.within"
    assert str(caught.value).startswith("retry.within: ")


def test_duration_error_says_booleans_are_not_numbers() -> None:
    with pytest.raises(DurationError, match="not a boolean"):
        parse_duration_us(True, "timeout")


@pytest.mark.parametrize(
    ("us", "text"),
    [(0, "0s"), (90 * MINUTE_US, "1h30m"), (1_500_000, "1s500ms"), (1, "1us"), (2 * DAY_US, "2d"),
     (DAY_US + 1, "1d1us"), (-5 * SECOND_US, "-5s")],
)  # fmt: skip
def test_format_duration(us: int, text: str) -> None:
    assert format_duration_us(us) == text


@given(st.integers(min_value=0, max_value=2**62))
def test_format_then_parse_is_identity(us: int) -> None:
    assert parse_duration_us(format_duration_us(us), "x") == us


# ---------------------------------------------------------------------------------------------
# Documents and defaults
# ---------------------------------------------------------------------------------------------


def test_minimal_job_gets_every_default() -> None:
    assert one() == JobSpec(id="j", schedule="0 * * * *", target_kind="handler", target="demo.echo")
    defaults = one()
    assert (defaults.timezone, defaults.owner, defaults.job_class) == ("UTC", "", "default")
    assert defaults.timeout_us == HOUR_US
    assert defaults.retry == RetryPolicy(3, 10 * SECOND_US, 5 * MINUTE_US, 2.0, 0)
    assert defaults.misfire == MisfirePolicy("fire_late", 10 * MINUTE_US, 10)
    assert (defaults.priority, defaults.payload_json) == (0, "")
    assert (defaults.dst_gap, defaults.dst_repeat) == ("", "")
    assert (defaults.jitter, defaults.overlap, defaults.paused) == ("auto", "allow", False)


def test_every_field() -> None:
    text = """
jobs:
  - id: payroll
    schedule: "0 2 * * 1-5"
    timezone: America/New_York
    target: {shell: "run-payroll --live"}
    owner: finance
    class: critical
    timeout: 2h
    retry:
      max_attempts: 5
      backoff: {initial: 30s, max: 10m, multiplier: 3}
      within: 4h
    priority: -20
    payload: {b: [1, 2.5, null, true], a: "x"}
    misfire: {policy: catch_up, grace: 1h, max_catch_up: 3}
    dst: {gap: skip, repeat: both}
    jitter: 90s
    overlap: forbid
    paused: true
"""
    (parsed,) = parse_jobs_document(text)
    assert parsed == JobSpec(
        id="payroll",
        schedule="0 2 * * 1-5",
        timezone="America/New_York",
        target_kind="shell",
        target="run-payroll --live",
        owner="finance",
        job_class="critical",
        timeout_us=2 * HOUR_US,
        retry=RetryPolicy(5, 30 * SECOND_US, 10 * MINUTE_US, 3.0, 4 * HOUR_US),
        priority=-20,
        payload_json='{"a":"x","b":[1,2.5,null,true]}',
        misfire=MisfirePolicy("catch_up", HOUR_US, 3),
        dst_gap="skip",
        dst_repeat="both",
        jitter="1m30s",
        overlap="forbid",
        paused=True,
    )
    assert type(parsed.retry.backoff_multiplier) is float


def test_bare_list_and_empty_list() -> None:
    (parsed,) = parse_jobs_document('- {id: a, schedule: "* * * * *", target: h}')
    assert parsed.id == "a"
    assert parse_jobs_document("jobs: []") == []


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "is empty"),
        ("# only a comment\n", "is empty"),
        ("42", "expected a mapping with a 'jobs' list, not an integer"),
        ("jobs: {id: a}", "must be a list, not a mapping"),
        ("jobs:", "must be a list, not null"),
        ("{}", "is required"),
        ("job: []", "did you mean 'jobs'?"),
    ],
)
def test_document_shape(text: str, needle: str) -> None:
    (found,) = problems_of(text)
    assert needle in str(found)


def test_job_that_is_not_a_mapping() -> None:
    (found,) = problems_of("jobs: [5]")
    assert str(found) == "job '#1': must be a mapping of job fields, not an integer"


def test_yaml_syntax_error_has_line_and_column() -> None:
    (found,) = problems_of("jobs:\n  - id: a\n    schedule: [unclosed\n")
    assert found.job_id == "" and found.field == ""
    assert found.message.startswith("<input>:")
    line, column = found.message.split(":")[1:3]
    assert line.isdigit() and column.isdigit()
    assert "YAML syntax error" in found.message


def test_unquoted_star_schedule_gets_a_hint() -> None:
    (found,) = problems_of("jobs:\n  - id: a\n    schedule: */5 * * * *\n    target: h\n")
    assert found.message.startswith("<input>:3:")
    assert "must be quoted" in found.message


def test_repeated_key_is_an_error_not_a_silent_override() -> None:
    text = 'jobs:\n  - id: a\n    schedule: "* * * * *"\n    target: h\n    schedule: "0 0 * * *"\n'
    (found,) = problems_of(text)
    assert found.message == "<input>:5:5: key 'schedule' repeats the one on line 3 of the same mapping"
    (found,) = problems_of('- {id: a, schedule: "* * * * *", target: h, payload: {x: 1, x: 2}}')
    assert "key 'x' repeats" in found.message


def test_repeated_keys_are_reported_with_the_other_problems() -> None:
    text = (
        '- {id: a, schedule: "* * * * *", target: h, owner: x, owner: y}\n'
        '- {id: b, schedule: "* * * * *", target: h, priority: 9999}\n'
    )
    found = problems_of(text)
    assert [(p.job_id, p.field) for p in found] == [("", ""), ("b", "priority")]


def test_yaml_anchors_and_merge_keys_share_settings() -> None:
    text = """
jobs:
  - &nightly {id: a, schedule: "0 3 * * *", timezone: Europe/Berlin, target: h, owner: ops}
  - <<: *nightly
    id: b
    owner: billing
"""
    first, second = parse_jobs_document(text)
    assert (second.id, second.timezone, second.owner) == ("b", "Europe/Berlin", "billing")
    assert first.owner == "ops"


def test_unsafe_yaml_tags_are_refused() -> None:
    (found,) = problems_of('- !!python/object/apply:os.system ["echo pwned"]')
    assert "YAML" in found.message


def test_impossible_date_is_a_problem_not_a_crash() -> None:
    (found,) = problems_of('- {id: a, schedule: "* * * * *", target: h, payload: 2024-02-30}')
    assert "invalid YAML value" in found.message


def test_source_name_appears_in_file_problems() -> None:
    with pytest.raises(SpecError) as caught:
        parse_jobs_document("jobs: [", source="team/jobs.yaml")
    assert caught.value.source == "team/jobs.yaml"
    assert str(caught.value).startswith("team/jobs.yaml:")


# ---------------------------------------------------------------------------------------------
# Errors: naming, collecting, all-or-nothing
# ---------------------------------------------------------------------------------------------


def test_problem_text_names_job_and_field() -> None:
    found = problems(job(id="payroll", timezone="Mars/Olympus"))
    assert [(p.job_id, p.field) for p in found] == [("payroll", "timezone")]
    assert str(found[0]).startswith("job 'payroll' field 'timezone': ")
    assert "Mars/Olympus" in str(found[0])
    assert str(SpecProblem("payroll", "timezone", "unknown time zone 'Mars/Olympus'")) == (
        "job 'payroll' field 'timezone': unknown time zone 'Mars/Olympus'"
    )


def test_every_problem_in_the_file_is_reported_and_nothing_is_returned() -> None:
    text = yaml.safe_dump(
        {
            "jobs": [
                job(id="good-1"),
                job(id="bad-1", priority=5000, overlap="sometimes"),
                job(id="good-2"),
                job(id="bad-2", timezone="Mars/Olympus"),
                job(id="bad-3", schedule="0 25 * * *"),
            ]
        }
    )
    with pytest.raises(SpecError) as caught:
        parse_jobs_document(text)
    error = caught.value
    assert [(p.job_id, p.field) for p in error.problems] == [
        ("bad-1", "priority"),
        ("bad-1", "overlap"),
        ("bad-2", "timezone"),
        ("bad-3", "schedule"),
    ]
    assert str(error).splitlines() == [str(p) for p in error.problems]
    assert isinstance(error, ValueError)


def test_problems_of_one_job_follow_field_order() -> None:
    found = problems(job(paused=1, timeoutt="1h", priority=True, id="x y"))
    assert [p.field for p in found] == ["timeoutt", "id", "priority", "paused"]  # unknown keys first


def test_job_without_a_usable_id_is_named_by_position() -> None:
    found = problems(job(id="ok"), job(id=DROP), job(id=7))
    assert [(p.job_id, p.field) for p in found] == [("#2", "id"), ("#3", "id")]
    assert found[0].message == "is required"


def test_missing_required_fields() -> None:
    # No schedule is not a problem: such a job is manual-only (tests/unit/specs/test_ways_to_fire.py).
    found = problems({"owner": "x"})
    assert [(p.job_id, p.field, p.message) for p in found] == [
        ("#1", "id", "is required"),
        ("#1", "target", "is required"),
    ]


def test_duplicate_ids() -> None:
    found = problems(job(id="a"), job(id="b"), job(id="a"))
    assert [(p.job_id, p.field) for p in found] == [("a", "id")]
    assert "job #1 and job #3" in found[0].message


def test_too_many_jobs() -> None:
    text = "jobs: [" + "1," * (specs.MAX_JOBS + 1) + "]"
    (found,) = problems_of(text)
    assert f"at most {specs.MAX_JOBS}" in found.message


def test_document_larger_than_8_mib() -> None:
    text = "# " + "x" * specs.MAX_FILE_BYTES + "\njobs: []\n"
    (found,) = problems_of(text)
    assert "larger than 8 MiB" in found.message


def test_size_limit_counts_bytes_not_characters() -> None:
    text = "# " + "é" * (specs.MAX_FILE_BYTES // 2) + "\njobs: []\n"
    assert len(text) < specs.MAX_FILE_BYTES
    (found,) = problems_of(text)
    assert "larger than 8 MiB" in found.message


# ---------------------------------------------------------------------------------------------
# Unknown keys and type confusions
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field", "suggestion"),
    [
        ({"timezon": "UTC"}, "timezon", "timezone"),
        ({"job_class": "x"}, "job_class", "class"),
        ({"timeout_us": 5}, "timeout_us", "timeout"),
        ({"retry": {"max_attemps": 2}}, "retry.max_attemps", "max_attempts"),
        ({"retry": {"backoff": {"inital": "1s"}}}, "retry.backoff.inital", "initial"),
        ({"misfire": {"polcy": "skip"}}, "misfire.polcy", "policy"),
        ({"dst": {"gaps": "skip"}}, "dst.gaps", "gap"),
        ({"target": {"handlr": "x"}}, "target.handlr", "handler"),
    ],
)
def test_unknown_key_suggests_the_closest(fields: dict[str, object], field: str, suggestion: str) -> None:
    found = problems(job(**fields))
    assert found[0].field == field
    assert found[0].message == f"unknown key (did you mean {suggestion!r}?)"


def test_unknown_key_without_a_close_match_lists_the_known_ones() -> None:
    found = problem(zzzzzz=1)
    assert found.field == "zzzzzz"
    assert "known keys: id, schedule, schedules" in found.message


def test_yaml_boolean_key_is_reported() -> None:
    (found,) = problems_of('- {id: j, schedule: "* * * * *", target: h, on: 1}')
    assert found.job_id == "j" and found.field == ""
    assert "key True is not a string" in found.message


@pytest.mark.parametrize(
    ("fields", "field", "needle"),
    [
        ({"priority": True}, "priority", "not a boolean"),
        ({"priority": 1.0}, "priority", "not a number"),
        ({"priority": "5"}, "priority", "not a string"),
        ({"timeout": True}, "timeout", "not a boolean"),
        ({"retry": {"max_attempts": False}}, "retry.max_attempts", "not a boolean"),
        ({"retry": {"backoff": {"multiplier": True}}}, "retry.backoff.multiplier", "not a boolean"),
        ({"misfire": {"max_catch_up": True}}, "misfire.max_catch_up", "not a boolean"),
        ({"misfire": {"grace": False}}, "misfire.grace", "not a boolean"),
        ({"paused": 1}, "paused", "not an integer"),
        ({"paused": 0}, "paused", "not an integer"),
        ({"paused": 1.0}, "paused", "not a number"),
        ({"paused": "true"}, "paused", "not a string"),
        ({"owner": 5}, "owner", "not an integer"),
        ({"id": True}, "id", "not a boolean"),
        ({"timezone": 5}, "timezone", "not an integer"),
        ({"overlap": False}, "overlap", "not a boolean"),
        ({"jitter": True}, "jitter", "not a boolean"),
    ],
)
def test_booleans_and_numbers_do_not_stand_in_for_each_other(
    fields: dict[str, object], field: str, needle: str
) -> None:
    found = problems(job(**fields))
    assert [p.field for p in found] == [field], found
    assert needle in found[0].message


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_non_finite_numbers_are_refused(value: str) -> None:
    for fields in (f"retry: {{backoff: {{multiplier: {value}}}}}", f"payload: {{x: {value}}}",
                   f"priority: {value}", f"timeout: {value}"):  # fmt: skip
        found = problems_of(f'- {{id: j, schedule: "* * * * *", target: h, {fields}}}')
        assert len(found) == 1 and found[0].job_id == "j", found


def test_yaml_yes_no_are_booleans_and_say_so() -> None:
    (found,) = problems_of('- {id: j, schedule: "* * * * *", target: h, overlap: no}')
    assert found.field == "overlap" and "boolean" in found.message
    (parsed,) = parse_jobs_document('- {id: j, schedule: "* * * * *", target: h, paused: yes}')
    assert parsed.paused is True


def test_octal_looking_id_must_be_quoted() -> None:
    (found,) = problems_of('- {id: 0755, schedule: "* * * * *", target: h}')
    assert (found.job_id, found.field) == ("#1", "id")
    assert "quote it" in found.message


# ---------------------------------------------------------------------------------------------
# Field rules
# ---------------------------------------------------------------------------------------------

GOOD_NAMES = ["a", "A", "0", "a" * 128, "billing.nightly_report:v2-eu", "9lives"]
BAD_NAMES = ["", "a" * 129, "-a", ".a", "_a", ":a", "a b", "a/b", "a\tb", "a\x00b", "a\x7fb", "é",
             "a\u200bb", "job!", "a\nb"]  # fmt: skip


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_good_names(name: str) -> None:
    parsed = one(id=name, **{"class": name}, target={"handler": name})
    assert (parsed.id, parsed.job_class, parsed.target) == (name, name, name)


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize("field", ["id", "class", "target"])
def test_bad_names(name: str, field: str) -> None:
    found = problems(job(**{field: name}))
    assert [p.field for p in found] == [field]
    if field != "id":
        assert found[0].job_id == "j"
    else:  # a job is named by its id, even a bad one, or else by its position
        assert found[0].job_id == (_short(name) if name else "#1")


def test_control_character_in_id_is_named() -> None:
    found = problem(**{"class": "a\x01b"})
    assert "control character '\\x01'" in found.message


def test_schedule_rules() -> None:
    assert one(schedule="*/5 * * * * *").schedule == "*/5 * * * * *"  # seconds first
    assert one(schedule="0 2 * * 1-5").schedule == "0 2 * * 1-5"
    assert problem(schedule="0 2 * *").field == "schedule"
    assert problem(schedule="61 * * * *").field == "schedule"
    assert problem(schedule="0 2 * * * * * *").field == "schedule"
    assert problem(schedule="").message == "must not be empty (leave `schedule:` out for a manual-only job)"
    assert problem(schedule=5).field == "schedule"


def test_timezone_rules() -> None:
    assert one(timezone="Europe/Berlin").timezone == "Europe/Berlin"
    found = problem(timezone="Mars/Olympus")
    assert found.field == "timezone" and "Mars/Olympus" in found.message
    assert problem(timezone="").message.startswith("must not be empty")


def test_schedule_and_time_zone_are_checked_together_with_dst() -> None:
    parsed = one(schedule="30 2 * * *", timezone="Europe/Berlin", dst={"gap": "skip", "repeat": "second"})
    assert (parsed.dst_gap, parsed.dst_repeat) == ("skip", "second")
    assert one(dst={"gap": "run_at_end"}).dst_repeat == ""
    assert one(dst={}).dst_gap == ""
    found = problem(dst={"gap": "later"})
    assert found.field == "dst.gap" and "'run_at_end', 'skip'" in found.message
    found = problem(dst={"repeat": "thrice"})
    assert found.field == "dst.repeat"
    assert problem(dst="skip").field == "dst"


def test_target_forms() -> None:
    plain = one(target="demo.echo")
    assert (plain.target_kind, plain.target) == ("handler", "demo.echo")
    handler = one(target={"handler": "reports.build"})
    assert (handler.target_kind, handler.target) == ("handler", "reports.build")
    shell = one(target={"shell": "echo 'hi' | tr a-z A-Z\nexit 0"})
    assert (shell.target_kind, shell.target) == ("shell", "echo 'hi' | tr a-z A-Z\nexit 0")
    assert "not several" in problem(target={"handler": "a", "shell": "b"}).message
    assert problem(target={}).field == "target"
    assert problem(target=5).field == "target"
    assert problem(target=None).field == "target"
    assert problem(target={"shell": 5}).field == "target"
    assert problem(target={"shell": "  "}).message == "shell command must not be empty"
    assert "NUL" in problem(target={"shell": "echo \x00"}).message


def test_shell_command_is_at_most_8_kib() -> None:
    assert len(one(target={"shell": "x" * 8192}).target) == 8192
    assert "at most 8192" in problem(target={"shell": "x" * 8193}).message
    assert "at most 8192" in problem(target={"shell": "é" * 4097}).message  # bytes, not characters


def test_owner() -> None:
    assert one(owner="Team Payments (EU)").owner == "Team Payments (EU)"
    assert problem(owner="x" * 257).field == "owner"
    assert "control character" in problem(owner="a\x1bb").message


@pytest.mark.parametrize(
    ("value", "us"),
    [("1s", SECOND_US), (1, SECOND_US), ("7d", 7 * DAY_US), ("500ms", 500_000), (604800, 7 * DAY_US)],
)
def test_timeout_accepts(value: object, us: int) -> None:
    assert one(timeout=value).timeout_us == us


@pytest.mark.parametrize("value", [0, "0s", "7d1us", 604801, -1, "1.5h", 1.5, "soon", None])
def test_timeout_rejects(value: object) -> None:
    assert problem(timeout=value).field == "timeout"


def test_retry_rules() -> None:
    assert one(retry={"max_attempts": 1}).retry.max_attempts == 1
    assert one(retry={"max_attempts": 100}).retry.max_attempts == 100
    for bad in (0, 101, -1, 2.0, "3", None):
        assert problem(retry={"max_attempts": bad}).field == "retry.max_attempts"
    short = one(retry={"backoff": "30s"}).retry
    assert (short.backoff_initial_us, short.backoff_max_us) == (30 * SECOND_US, 5 * MINUTE_US)
    assert short.backoff_multiplier == 2.0
    long_initial = one(retry={"backoff": "10m"}).retry
    assert long_initial.backoff_max_us == 10 * MINUTE_US  # an unset max never undercuts the initial
    assert one(retry={"backoff": 0}).retry.backoff_initial_us == 0
    assert one(retry={"backoff": {"multiplier": 1}}).retry.backoff_multiplier == 1.0
    assert one(retry={"backoff": {"multiplier": 10.0}}).retry.backoff_multiplier == 10.0
    for bad in (0.99, 10.5, 0, -2, "2"):
        assert problem(retry={"backoff": {"multiplier": bad}}).field == "retry.backoff.multiplier"
    found = problem(retry={"backoff": {"initial": "1m", "max": "30s"}})
    assert found.field == "retry.backoff.max" and "initial backoff (1m)" in found.message
    assert problem(retry={"backoff": {"initial": "2d"}}).field == "retry.backoff.initial"
    assert problem(retry={"backoff": "1.5s"}).field == "retry.backoff"
    assert problem(retry={"backoff": [1]}).field == "retry.backoff"
    assert one(retry={"within": "6h"}).retry.within_us == 6 * HOUR_US
    assert one(retry={"within": 0}).retry.within_us == 0  # 0: no limit
    assert problem(retry={"within": "1y"}).field == "retry.within"
    assert problem(retry=3).field == "retry"
    assert problem(retry=None).field == "retry"


@pytest.mark.parametrize(("value", "ok"), [(-1000, True), (1000, True), (0, True), (-1001, False), (1001, False)])
def test_priority_bounds(value: int, ok: bool) -> None:
    if ok:
        assert one(priority=value).priority == value
    else:
        assert problem(priority=value).message == f"must be between -1000 and 1000, got {value}"


def test_misfire_rules() -> None:
    for policy in ("fire_late", "skip", "catch_up"):
        assert one(misfire={"policy": policy}).misfire.policy == policy
    found = problem(misfire={"policy": "catchup"})
    assert found.field == "misfire.policy" and "did you mean 'catch_up'?" in found.message
    assert one(misfire={"grace": "0s"}).misfire.grace_us == 0
    assert one(misfire={"grace": "30s"}).misfire.grace_us == 30 * SECOND_US
    assert problem(misfire={"grace": "8d"}).field == "misfire.grace"
    assert one(misfire={"max_catch_up": 0}).misfire.max_catch_up == 0
    assert one(misfire={"max_catch_up": 1000}).misfire.max_catch_up == 1000
    assert problem(misfire={"max_catch_up": 1001}).field == "misfire.max_catch_up"
    assert problem(misfire={"max_catch_up": -1}).field == "misfire.max_catch_up"
    assert problem(misfire="skip").field == "misfire"


@pytest.mark.parametrize(
    ("value", "stored"),
    [("auto", "auto"), ("pinned", "pinned"), ("0", "pinned"), (0, "pinned"), ("0s", "pinned"),
     ("90s", "1m30s"), (300, "5m"), ("24h", "1d"), ("1ms", "1ms")],
)  # fmt: skip
def test_jitter_accepts(value: object, stored: str) -> None:
    assert one(jitter=value).jitter == stored


@pytest.mark.parametrize("value", ["24h1s", "2d", "sometimes", "", "-5s", 1.5, None, "Auto"])
def test_jitter_rejects(value: object) -> None:
    assert problem(jitter=value).field == "jitter"


def test_jitter_suggestion() -> None:
    assert "did you mean 'pinned'?" in problem(jitter="pinnned").message


def test_overlap_and_paused() -> None:
    for rule in ("allow", "forbid", "queue", "replace"):
        assert one(overlap=rule).overlap == rule
    assert "did you mean 'forbid'?" in problem(overlap="forbidd").message
    assert one(paused=True).paused is True
    assert one(paused=False).paused is False


# ---------------------------------------------------------------------------------------------
# Payloads
# ---------------------------------------------------------------------------------------------


def test_payload_is_canonical_json() -> None:
    parsed = one(payload={"b": 1, "a": {"d": [1, 2.5, None], "c": "é"}})
    assert parsed.payload_json == '{"a":{"c":"\\u00e9","d":[1,2.5,null]},"b":1}'
    decoded = json.loads(parsed.payload_json)
    assert parsed.payload_json == json.dumps(decoded, sort_keys=True, separators=(",", ":"))
    assert one(payload=[3, 2, 1]).payload_json == "[3,2,1]"
    assert one(payload="text").payload_json == '"text"'
    assert one(payload=None).payload_json == "null"
    assert one().payload_json == ""


def test_same_payload_written_differently_is_the_same_spec() -> None:
    first = parse_jobs_document('- {id: j, schedule: "* * * * *", target: h, payload: {a: 1, b: [x]}}')
    second = parse_jobs_document('- id: j\n  schedule: "* * * * *"\n  target: h\n  payload:\n    b: ["x"]\n    a: 1\n')
    assert first == second


def nested(depth: int) -> object:
    value: object = 1
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def test_payload_depth() -> None:
    deepest = one(payload=nested(32)).payload_json
    assert deepest.count("[") + deepest.count("{") == 32
    found = problem(payload=nested(33))
    assert found.field.startswith("payload") and "deeper than 32" in found.message


def test_payload_size() -> None:
    overhead = len('{"s":""}')
    assert len(one(payload={"s": "x" * (65536 - overhead)}).payload_json) == 65536
    found = problem(payload={"s": "x" * (65537 - overhead)})
    assert found.field == "payload" and "64 KiB" in found.message
    # Escapes count as they are stored: 11,000 "é" become 66,000 bytes of "\u00e9".
    assert "64 KiB" in problem(payload="é" * 11000).message


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        ("{1: x}", "key 1 is not a string"),
        ("{a: {yes: 1}}", "key True is not a string"),
        ("{when: 2024-05-01}", "date is not a JSON value"),
        ("{raw: !!binary aGVsbG8=}", "bytes is not a JSON value"),
        ("!!set {a, b}", "set is not a JSON value"),
        ("{a: [1, .nan]}", "finite"),
    ],
)
def test_payload_values_that_are_not_json(payload: str, needle: str) -> None:
    (found,) = problems_of(f'- {{id: j, schedule: "* * * * *", target: h, payload: {payload}}}')
    assert found.field.startswith("payload") and needle in found.message


def test_payload_problem_points_inside_the_value() -> None:
    (found,) = problems_of('- {id: j, schedule: "* * * * *", target: h, payload: {a: {b: [0, 1, .inf]}}}')
    assert found.field == "payload.a.b[2]"


def test_recursive_yaml_payload_is_refused() -> None:
    (found,) = problems_of('- {id: j, schedule: "* * * * *", target: h, payload: &loop [*loop]}')
    assert "deeper than 32" in found.message


def test_alias_bomb_is_refused_quickly() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
              f"*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 9)]  # fmt: skip
    text = "- id: j\n  schedule: '* * * * *'\n  target: h\n  payload:\n"
    text += "".join(f"    {line}\n" for line in lines)
    started = time.monotonic()
    (found,) = problems_of(text)
    assert "64 KiB" in found.message
    assert time.monotonic() - started < 5


def test_canonical_payload_json_helper() -> None:
    assert canonical_payload_json({"b": 1, "a": True}) == '{"a":true,"b":1}'
    with pytest.raises(ValueError, match="finite"):
        canonical_payload_json({"a": math.nan})


# ---------------------------------------------------------------------------------------------
# validate_spec: the same rules for specs that did not come from a file
# ---------------------------------------------------------------------------------------------


def test_valid_spec_has_no_problems() -> None:
    for parsed in load_jobs_file(EXAMPLE):
        assert validate_spec(parsed) == []


def test_validate_spec_reports_every_bad_field() -> None:
    bad = spec(
        id="bad id",
        schedule="0 2 * *",
        timezone="",
        target_kind="grpc",  # not a target kind
        owner="a\x00",
        job_class="",
        timeout_us=0,
        retry=RetryPolicy(
            max_attempts=0, backoff_initial_us=-1, backoff_max_us=2 * DAY_US, backoff_multiplier=math.nan, within_us=-5
        ),  # fmt: skip
        priority=True,
        payload_json="{bad",
        misfire=MisfirePolicy(policy="later", grace_us=-1, max_catch_up=1001),
        dst_gap="never",
        dst_repeat="thrice",
        jitter="0",
        overlap="sometimes",
        paused=1,
    )
    found = validate_spec(bad)
    assert {p.job_id for p in found} == {"bad id"}
    assert [p.field for p in found] == [
        "id", "timezone", "target", "owner", "class", "timeout",
        "retry.max_attempts", "retry.backoff.initial", "retry.backoff.max",
        "retry.backoff.multiplier", "retry.within", "priority", "payload",
        "misfire.policy", "misfire.grace", "misfire.max_catch_up", "dst.gap", "dst.repeat",
        "jitter", "overlap", "paused",
    ]  # fmt: skip
    # "0 2 * *" is wrong too, but a schedule is compiled only once its time zone and DST
    # options pass their own checks (test_validate_spec_compiles_the_schedule).
    assert "'pinned'" in next(p.message for p in found if p.field == "jitter")


def test_validate_spec_compiles_the_schedule() -> None:
    (found,) = validate_spec(spec(schedule="0 25 * * *"))
    assert found.field == "schedule"
    (found,) = validate_spec(spec(timezone="Mars/Olympus"))
    assert found.field == "timezone"
    assert validate_spec(spec(schedule="30 2 * * *", timezone="Europe/Berlin", dst_gap="skip")) == []


def test_validate_spec_checks_types_a_client_could_send() -> None:
    fields = {p.field for p in validate_spec(spec(timeout_us=True, priority="5", retry=None, misfire={}))}
    assert fields == {"timeout", "priority", "retry", "misfire"}
    assert validate_spec(spec(id=None))[0].job_id == "?"


@pytest.mark.parametrize(
    ("payload_json", "needle"),
    [
        ('{"b":1,"a":2}', "canonical"),
        ('{"a": 1}', "canonical"),
        ('{"a":1,"a":2}', "canonical"),
        ("NaN", "not valid JSON"),
        ('{"a":Infinity}', "not valid JSON"),
        ("1e999", "finite"),
        ("[" * 33 + "]" * 33, "deeper than 32"),
        ("[" * 50000, "deeper than 32"),
        ('"' + "x" * 65536 + '"', "64 KiB"),
        ("{", "not valid JSON"),
    ],
)
def test_validate_spec_payload_json(payload_json: str, needle: str) -> None:
    (found,) = validate_spec(spec(payload_json=payload_json))
    assert found.field == "payload" and needle in found.message


def test_validate_spec_accepts_canonical_payloads() -> None:
    longest = '"' + "x" * 65534 + '"'
    for text in ('{"a":[1,2.5,null,true],"b":"\\u00e9"}', "null", "[" * 32 + "]" * 32, longest):
        assert validate_spec(spec(payload_json=text)) == []


def test_document_and_spec_problems_share_one_message() -> None:
    from_document = problem(priority=5000)
    (from_spec,) = validate_spec(spec(priority=5000))
    assert (from_document.field, from_document.message) == (from_spec.field, from_spec.message)


def test_validate_spec_does_not_raise_on_jitter_windows() -> None:
    assert validate_spec(spec(jitter="90s")) == []  # a client may send a non-canonical window
    assert validate_spec(spec(jitter="24h")) == []
    assert validate_spec(spec(jitter="24h1us"))[0].field == "jitter"


# ---------------------------------------------------------------------------------------------
# spec_to_document: the way back
# ---------------------------------------------------------------------------------------------


def test_document_of_a_default_spec_is_minimal() -> None:
    assert spec_to_document(one()) == {"id": "j", "schedule": "0 * * * *", "target": "demo.echo"}


def test_document_of_a_shell_job() -> None:
    assert spec_to_document(one(target={"shell": "echo hi"}))["target"] == {"shell": "echo hi"}


def test_full_document_has_every_field() -> None:
    document = spec_to_document(one(), full=True)
    # "no payload" and "no calendar" have no document form; the other ways to fire and the limits
    # are alternatives
    ways_and_limits = {
        "schedules", "every", "anchor", "at", "active", "max_runs", "pause_after_failures", "after", "deadline"
    }  # fmt: skip
    assert set(document) == set(_JOB_KEYS) - {"payload", "calendar"} - ways_and_limits
    assert document["retry"] == {
        "max_attempts": 3,
        "backoff": {"initial": "10s", "max": "5m", "multiplier": 2.0},
        "within": "0s",
    }
    assert document["misfire"] == {"policy": "fire_late", "grace": "10m", "max_catch_up": 10}
    assert document["dst"] == {"gap": "", "repeat": ""}
    assert parse_jobs_document(yaml.safe_dump({"jobs": [document]})) == [one()]


def test_backoff_uses_the_short_form_when_it_can() -> None:
    assert spec_to_document(one(retry={"backoff": "30s"}))["retry"] == {"backoff": "30s"}
    assert spec_to_document(one(retry={"backoff": "10m"}))["retry"] == {"backoff": "10m"}
    assert spec_to_document(one(retry={"backoff": {"initial": "30s", "max": "1h"}}))["retry"] == {
        "backoff": {"initial": "30s", "max": "1h"}
    }
    document = spec_to_document(one(retry={"backoff": {"multiplier": 3}}))
    assert document["retry"] == {"backoff": {"multiplier": 3.0}}


def test_example_file_round_trips() -> None:
    parsed = load_jobs_file(EXAMPLE)
    for full in (False, True):
        documents = [spec_to_document(s, full=full) for s in parsed]
        assert parse_jobs_document(yaml.safe_dump({"jobs": documents})) == parsed
        assert parse_jobs_document(json.dumps({"jobs": documents})) == parsed  # JSON is YAML too


names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,20}", fullmatch=True)
durations = st.integers(min_value=0, max_value=DAY_US)
finite_floats = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | finite_floats | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
printable = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=30)


@st.composite
def job_specs(draw: st.DrawFn) -> JobSpec:
    initial = draw(durations)
    kind = draw(st.sampled_from(["handler", "shell"]))
    return JobSpec(
        id=draw(names),
        schedule=draw(st.sampled_from(["*/5 * * * * *", "0 2 * * 1-5", "15 6 * * *", "* * * * *"])),
        timezone=draw(st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"])),
        target_kind=kind,
        target=draw(names if kind == "handler" else printable.filter(str.strip)),
        owner=draw(printable),
        job_class=draw(names),
        timeout_us=draw(st.integers(1, 7 * DAY_US)),
        retry=RetryPolicy(
            max_attempts=draw(st.integers(1, 100)),
            backoff_initial_us=initial,
            backoff_max_us=draw(st.integers(initial, DAY_US)),
            backoff_multiplier=draw(st.floats(1.0, 10.0)),
            within_us=draw(st.integers(0, 365 * DAY_US)),
        ),
        priority=draw(st.integers(-1000, 1000)),
        payload_json=draw(st.just("") | json_values.map(canonical_payload_json)),
        misfire=MisfirePolicy(
            policy=draw(st.sampled_from(["fire_late", "skip", "catch_up"])),
            grace_us=draw(st.integers(0, 7 * DAY_US)),
            max_catch_up=draw(st.integers(0, 1000)),
        ),
        dst_gap=draw(st.sampled_from(["", "run_at_end", "skip"])),
        dst_repeat=draw(st.sampled_from(["", "first", "second", "both"])),
        jitter=draw(st.sampled_from(["auto", "pinned"]) | st.integers(1, DAY_US).map(format_duration_us)),
        overlap=draw(st.sampled_from(["allow", "forbid", "queue", "replace"])),
        paused=draw(st.booleans()),
    )


@settings(max_examples=200, deadline=None)
@given(job_specs(), st.booleans())
def test_round_trip_of_any_valid_spec(original: JobSpec, full: bool) -> None:
    assert validate_spec(original) == []
    document = spec_to_document(original, full=full)
    assert parse_jobs_document(yaml.safe_dump({"jobs": [document]})) == [original]
    # The round trip is exact down to the bytes replicas would store.
    (again,) = parse_jobs_document(yaml.safe_dump([document]))
    assert msgspec.msgpack.encode(again) == msgspec.msgpack.encode(original)


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


def test_example_file_parses() -> None:
    parsed = {s.id: s for s in load_jobs_file(EXAMPLE)}
    heartbeat = parsed["demo.heartbeat"]
    assert heartbeat.schedule == "*/5 * * * * *"
    assert (heartbeat.target_kind, heartbeat.target) == ("handler", "demo.echo")
    nightly = parsed["reports.nightly-sales"]
    assert nightly.timezone == "Europe/Berlin" and nightly.retry.max_attempts > 1 and nightly.payload_json
    payroll = parsed["payroll"]
    assert (payroll.schedule, payroll.timezone) == ("0 2 * * 1-5", "America/New_York")
    assert (payroll.overlap, payroll.misfire.policy) == ("forbid", "skip")
    cleanup = parsed["maintenance.cleanup"]
    assert (cleanup.target_kind, cleanup.target) == ("shell", "echo cleaning up")
    assert cleanup.schedule == "* * * * *"


def test_load_jobs_file(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + EXAMPLE.read_bytes())  # a byte order mark is fine
    assert load_jobs_file(path) == load_jobs_file(EXAMPLE)
    path.write_text('- {id: j, schedule: "* * * * *", target: h, timezone: Mars/Olympus}\n')
    with pytest.raises(SpecError) as caught:
        load_jobs_file(str(path))
    assert caught.value.source == str(path)
    assert [(p.job_id, p.field) for p in caught.value.problems] == [("j", "timezone")]


def test_load_jobs_file_refuses_non_utf8_and_big_files(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_bytes(b"jobs: [\xff]\n")
    with pytest.raises(SpecError, match="not UTF-8"):
        load_jobs_file(path)
    path.write_bytes(b"#" * (specs.MAX_FILE_BYTES + 1))
    with pytest.raises(SpecError, match="larger than 8 MiB"):
        load_jobs_file(path)
    with pytest.raises(OSError):
        load_jobs_file(tmp_path / "missing.yaml")


# ---------------------------------------------------------------------------------------------
# Robustness: any input ends in specs or in a SpecError, never in another exception
# ---------------------------------------------------------------------------------------------

plausible = st.sampled_from(["5m", "0", "auto", "skip", "forbid", "*/5 * * * * *", "Europe/Berlin", "demo.echo"])
nested_keys = st.sampled_from(
    ["handler", "shell", "initial", "max", "multiplier", "gap", "policy", "grace", "max_attempts",
     "backoff", "x"]
)  # fmt: skip
anything = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**80), 2**80) | st.floats() | st.text(max_size=12)
    | plausible,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(nested_keys, inner, max_size=3),
    max_leaves=8,
)  # fmt: skip
job_like = st.dictionaries(st.sampled_from([*_JOB_KEYS, "tz", "class_"]), anything, max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(job_like, max_size=3))
def test_any_job_document_gives_specs_or_a_spec_error(jobs: list[dict[str, object]]) -> None:
    try:
        parsed = parse_jobs_document(yaml.safe_dump({"jobs": jobs}))
    except SpecError as error:
        assert error.problems
    else:
        assert all(validate_spec(s) == [] for s in parsed)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_gives_specs_or_a_spec_error(text: str) -> None:
    try:
        parse_jobs_document(text)
    except SpecError as error:
        assert error.problems


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from([f.name for f in msgspec.structs.fields(JobSpec)]), anything))
def test_validate_spec_never_raises(fields: dict[str, object]) -> None:
    assert isinstance(validate_spec(spec(**fields)), list)


def test_the_string_scan_finds_exactly_unicodes_control_and_surrogate_characters():
    # The scan is a regular expression (speed); the definition is Unicode's categories Cc and Cs.
    differ = [
        code
        for code in range(sys.maxunicode + 1)
        if (unicodedata.category(chr(code)) in ("Cc", "Cs")) != bool(_CONTROL_OR_SURROGATE.search(chr(code)))
    ]
    assert differ == []
    assert text_problem("ok \u00e9\u4e2d", 64) is None
    assert text_problem("a\x85b", 64) == "contains the control character '\\x85'"
    assert text_problem("a\ud800b", 64) == "contains a lone surrogate '\\ud800'"
