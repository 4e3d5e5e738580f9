"""Job files: `schedules:`, `every:` with `anchor:`, `at:`, no schedule at all, `active:` and
`max_runs:`; what each reads as, and every error (file, job, field, reason)."""

from __future__ import annotations

import pytest
import yaml
from msgspec import UNSET

from scheduler.core.model import ActiveWindow
from scheduler.planning import parse_iso_to_us
from scheduler.specs import SpecError, spec_to_document
from scheduler.specs.reader import parse_job_document
from tests.unit.specs.one_job import problems, read


def test_each_way_to_fire_reads_and_renders_back() -> None:
    cases = [
        {"schedules": ["0 9 * * 1-5", "0 12 * * 6"]},
        {"every": "90s"},
        {"every": "1h", "anchor": "2026-01-01T00:30:00Z"},
        {"at": "2027-03-01T09:00:00Z"},
        {},
        {"schedule": "*/5 * * * *", "active": {"from": "2026-12-01T00:00:00Z"}, "max_runs": 10},
    ]
    for fields in cases:
        spec = read(**fields)
        again = parse_job_document(yaml.safe_dump({"jobs": [spec_to_document(spec)]})).jobs[0]
        assert again == spec, fields


def test_the_values_read_as_the_spec_holds_them() -> None:
    assert read(schedules=["0 9 * * *"]).schedules == ("0 9 * * *",)
    assert read(every="90s").every_us == 90_000_000 and read(every="90s").anchor_us is UNSET
    assert read(at="2027-03-01T10:00:00+01:00").at_us == parse_iso_to_us("2027-03-01T09:00:00Z")
    window = read(schedule="* * * * *", active={"until": "2027-01-01T00:00:00Z"}).active
    assert window == ActiveWindow(0, parse_iso_to_us("2027-01-01T00:00:00Z"))
    manual = read()
    assert manual.schedule == "" and manual.schedules is UNSET and manual.every_us is UNSET


def test_an_unquoted_yaml_timestamp_is_an_instant_too() -> None:
    text = "jobs:\n  - id: j\n    target: demo.hello\n    at: 2027-03-01T09:00:00Z\n"
    assert parse_job_document(text).jobs[0].at_us == parse_iso_to_us("2027-03-01T09:00:00Z")


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"schedule": "* * * * *", "schedules": ["0 9 * * *"]},
            ("schedules", "use one of schedule, schedules, every, at, not schedule and schedules together"),
        ),
        (
            {"every": "1m", "at": "2027-03-01T09:00:00Z"},
            ("at", "use one of schedule, schedules, every, at, not every and at together"),
        ),
        (
            {"schedules": []},
            ("schedules", "must list at least one cron expression (for none, leave it out: manual-only)"),
        ),
        ({"schedules": "0 9 * * *"}, ("schedules", "must be a list of cron expressions, not a string")),
        ({"schedules": ["0 9 * * *", "61 * * * *"]}, ("schedules[1]", "minute value 61 is outside 0-59")),
        ({"schedules": ["0 9 * * *", " 0 9 * * *"]}, ("schedules[1]", "repeats schedules[0]")),
        ({"schedules": ["* * * * *"] * 17}, ("schedules", "lists 17 expressions; at most 16 are allowed")),
        ({"schedule": ""}, ("schedule", "must not be empty (leave `schedule:` out for a manual-only job)")),
        ({"every": "0s"}, ("every", "must be at least 1s and at most 365d, got 0s")),
        (
            {"every": "soon"},
            (
                "every",
                "'soon' is not a duration like '90s', '10m', '1h30m', '2d', '500ms' or a whole number of seconds",
            ),
        ),
        (
            {"every": "1m", "anchor": "2026-01-01T00:00:00"},
            ("anchor", "needs a UTC offset (add Z for UTC): 2026-01-01T00:00:00"),
        ),
        (
            {"schedule": "* * * * *", "anchor": "2026-01-01T00:00:00Z"},
            ("anchor", "is the start of an `every:` interval; this job has no `every:`"),
        ),
        (
            {"at": "2027-03-01"},
            (
                "at",
                "must be an ISO-8601 instant with a UTC offset, e.g. 2027-03-01T09:00:00Z, not a date alone (2027-03-01)",
            ),
        ),
        (
            {"at": "tomorrow"},
            ("at", "must be an ISO-8601 instant with a UTC offset, e.g. 2027-03-01T09:00:00Z; got 'tomorrow'"),
        ),
        ({"at": 5}, ("at", "must be an ISO-8601 instant with a UTC offset, e.g. 2027-03-01T09:00:00Z, not an integer")),
        (
            {"at": "1969-12-31T23:59:59Z"},
            ("at", "must be between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z"),
        ),
        ({"schedule": "* * * * *", "active": {}}, ("active", "needs `from:`, `until:` or both")),
        ({"schedule": "* * * * *", "active": "always"}, ("active", "must be a mapping, not a string")),
        (
            {"schedule": "* * * * *", "active": {"from": "2026-01-01T00:00:00Z", "to": "x"}},
            ("active.to", "unknown key; known keys: from, until"),
        ),
        (
            {"schedule": "* * * * *", "active": {"from": "2027-01-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}},
            ("active.until", "must be after active.from (2027-01-01T00:00:00Z)"),
        ),
        (
            {"active": {"from": "2027-01-01T00:00:00Z"}},
            ("active", "bounds scheduled slots; a job without a schedule has none (it is manual-only)"),
        ),
        ({"schedule": "* * * * *", "max_runs": 0}, ("max_runs", "must be between 1 and 1000000000, got 0")),
        ({"schedule": "* * * * *", "max_runs": "5"}, ("max_runs", "must be a whole number, not a string")),
        ({"max_runs": 5}, ("max_runs", "counts scheduled runs; a job without a schedule has none (it is manual-only)")),
    ],
)
def test_every_error_names_the_field_and_the_reason(fields, expected) -> None:
    assert expected in problems(**fields)


def test_an_error_says_the_file_and_the_job() -> None:
    with pytest.raises(SpecError) as caught:
        read(every="0s")
    assert caught.value.source == "jobs.yaml" and str(caught.value).startswith("job 'j' field 'every': ")


def test_a_repeat_does_not_hide_a_bad_expression_in_the_same_list() -> None:
    found = problems(schedules=["0 9 * * *", "61 * * * *", "0 9 * * *"])
    assert ("schedules[1]", "minute value 61 is outside 0-59") in found
    assert ("schedules[2]", "repeats schedules[0]") in found


def test_pause_after_failures_reads_renders_and_is_bounded() -> None:
    spec = read(schedule="0 * * * *", pause_after_failures=3)
    assert spec.pause_after_failures == 3
    assert spec_to_document(spec)["pause_after_failures"] == 3
    assert read(schedule="0 * * * *").pause_after_failures is UNSET
    for bad in (0, -1, "three", 10_001):
        (problem,) = problems(schedule="0 * * * *", pause_after_failures=bad)
        assert problem[0] == "pause_after_failures"


def test_pause_after_failures_travels_over_grpc() -> None:
    from scheduler.rpc.convert import spec_from_pb, spec_to_pb

    spec = read(schedule="0 * * * *", pause_after_failures=4)
    assert spec_from_pb(spec_to_pb(spec)).pause_after_failures == 4
    assert spec_from_pb(spec_to_pb(read(schedule="0 * * * *"))).pause_after_failures is UNSET


def test_final_exit_codes_read_render_travel_and_are_checked() -> None:
    from scheduler.rpc.convert import spec_from_pb, spec_to_pb

    spec = read(schedule="0 * * * *", retry={"final_exit_codes": [2, 64]})
    assert spec.retry.final_exit_codes == (2, 64)
    assert spec_to_document(spec)["retry"]["final_exit_codes"] == [2, 64]
    assert spec_from_pb(spec_to_pb(spec)).retry.final_exit_codes == (2, 64)
    for bad in ([], [0], [256], ["2"], [2, 2]):
        (problem,) = problems(schedule="0 * * * *", retry={"final_exit_codes": bad})
        assert problem[0] == "retry.final_exit_codes"
