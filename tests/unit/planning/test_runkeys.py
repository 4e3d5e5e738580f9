"""One readable run-key format for people, handlers, logs and alerts; the stored form kept."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from scheduler.core.alerts import alert_id
from scheduler.core.model import format_run_key
from scheduler.core.vocabulary import AlertKind
from scheduler.logs import run_fields
from scheduler.planning.runkeys import parse_run_key, readable_run_key, readable_run_keys_in
from scheduler.rpc.convert import printable_run_key
from worker.testing import make_context

SLOT_US = 1_796_151_540_000_000  # 2026-12-01T18:59:00Z


def test_seconds_and_fractions_only_when_present():
    assert readable_run_key("payroll", SLOT_US) == "payroll@2026-12-01T18:59:00Z"
    assert readable_run_key("payroll", SLOT_US + 5) == "payroll@2026-12-01T18:59:00.000005Z"
    assert printable_run_key("payroll", SLOT_US) == readable_run_key("payroll", SLOT_US)


@pytest.mark.parametrize(
    "text",
    ["payroll@2026-12-01T18:59:00Z", "payroll@1796151540000000", "payroll@2026-12-01T13:59:00-05:00"],
)
def test_both_forms_parse(text):
    assert parse_run_key(text) == ("payroll", SLOT_US)


@pytest.mark.parametrize("text", ["payroll", "@2026-12-01T18:59:00Z", "payroll@", "payroll@yesterday"])
def test_what_is_not_a_run_key(text):
    with pytest.raises(ValueError, match="JOB@INSTANT|ISO-8601"):
        parse_run_key(text)


def test_stored_keys_are_shown_readable_and_nothing_else_is_touched():
    stored = f"overlap_forbid: run a.b-c@{SLOT_US} still live"
    assert readable_run_keys_in(stored) == "overlap_forbid: run a.b-c@2026-12-01T18:59:00Z still live"
    for text in ("mail ops@example.com", "at 12@3.5", "e@1:2", "already a@2026-12-01T18:59:00Z"):
        assert readable_run_keys_in(text) == text


def test_replicated_forms_keep_their_bytes_and_display_readable():
    # A reason and an alert id are replicated (the id is a dedup key): their bytes stay as they were.
    assert format_run_key("a", SLOT_US) == f"a@{SLOT_US}"
    assert alert_id(AlertKind.FAILED, "a", SLOT_US) == f"failed:a@{SLOT_US}"
    assert readable_run_keys_in(alert_id(AlertKind.FAILED, "a", SLOT_US)) == "failed:a@2026-12-01T18:59:00Z"


def test_node_logs_name_runs_readably():
    assert run_fields("a", SLOT_US)["run_key"] == "a@2026-12-01T18:59:00Z"


def test_the_sdks_test_context_uses_the_same_form():
    at = datetime(2026, 12, 1, 18, 59, tzinfo=timezone.utc)
    assert make_context(job_id="a", scheduled_at=at).run_key == "a@2026-12-01T18:59:00Z"
    assert make_context(job_id="a", scheduled_at=at.replace(microsecond=5)).run_key == "a@2026-12-01T18:59:00.000005Z"


def test_a_delivered_alert_keeps_its_dedup_id_and_reads_readable():
    from scheduler.core.model import Alert
    from scheduler.leader.alert_delivery import alert_document

    stored_id = alert_id(AlertKind.SKIPPED, "a", SLOT_US)
    alert = Alert(stored_id, "skipped", "a", "ops", "default", SLOT_US, f"run a@{SLOT_US} still live", SLOT_US)
    document = alert_document(alert)
    assert document["id"] == stored_id  # the Idempotency-Key a receiver already dedups by
    assert document["readable_id"] == "skipped:a@2026-12-01T18:59:00Z"
