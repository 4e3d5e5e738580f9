"""Specs -> job documents, in the form the reader turns back into the same spec (the effective
settings `raftcron plan` shows for each job)."""

from __future__ import annotations

import json

from msgspec import UNSET

from scheduler.core.model import HttpTarget, JobSpec, MisfirePolicy, RetryPolicy
from scheduler.core.vocabulary import TargetKind
from scheduler.planning import format_us
from scheduler.planning.durations import format_duration_us
from scheduler.specs.rules import (
    _DEFAULT,
    _DEFAULT_HISTORY,
    _DEFAULT_MISFIRE,
    _DEFAULT_RETRY,
    _HISTORY_KEYS,
    _default_backoff_max,
)


def _plain(value: str) -> str:
    """A vocabulary member as its plain string: a document is plain data, and YAML's safe dumper
    refuses a str subclass."""
    return str(value)


def spec_to_document(spec: JobSpec, full: bool = False) -> dict[str, object]:
    """The job mapping that parses back to `spec`: non-default fields only, or all with `full`."""
    document: dict[str, object] = {"id": spec.id}
    document.update(_ways_to_fire_document(spec))

    def put(key: str, value: object, default: object) -> None:
        if full or value != default:
            document[key] = _plain(value) if isinstance(value, str) else value

    put("timezone", spec.timezone, _DEFAULT.timezone)
    if spec.target_kind == TargetKind.HANDLER:
        document["target"] = spec.target
    elif spec.target_kind == TargetKind.HTTP and isinstance(spec.http, HttpTarget):
        document["target"] = {"http": http_document(spec.http, full)}
    else:
        document["target"] = {_plain(spec.target_kind): spec.target}
    put("owner", spec.owner, _DEFAULT.owner)
    put("class", spec.job_class, _DEFAULT.job_class)
    put("timeout", format_duration_us(spec.timeout_us), format_duration_us(_DEFAULT.timeout_us))
    retry = _retry_document(spec.retry, full)
    if retry:
        document["retry"] = retry
    put("priority", spec.priority, _DEFAULT.priority)
    if spec.payload_json:  # no payload has no document form: `payload: null` is the JSON null
        document["payload"] = json.loads(spec.payload_json)
    misfire = _misfire_document(spec.misfire, full)
    if misfire:
        document["misfire"] = misfire
    dst = {"gap": _plain(spec.dst_gap), "repeat": _plain(spec.dst_repeat)}
    dst = {key: value for key, value in dst.items() if full or value}
    if dst:
        document["dst"] = dst
    put("jitter", spec.jitter, _DEFAULT.jitter)
    put("overlap", spec.overlap, _DEFAULT.overlap)
    put("paused", spec.paused, _DEFAULT.paused)
    if spec.uses or full:
        document["uses"] = list(spec.uses)
    history = {
        key: format_duration_us(getattr(spec.history, name)) if name.endswith("_us") else getattr(spec.history, name)
        for key, name in _HISTORY_KEYS.items()
        if full or getattr(spec.history, name) != getattr(_DEFAULT_HISTORY, name)
    }
    if history:
        document["history"] = history
    if spec.calendar:
        rule = {key: list(getattr(spec.calendar, key)) for key in ("skip", "only") if getattr(spec.calendar, key)}
        document["calendar"] = {**rule, "on_skip": str(spec.calendar.on_skip)}
    return document


def _ways_to_fire_document(spec: JobSpec) -> dict[str, object]:
    """`schedule:` (also for a manual-only job, as ''), or the other way it fires, and its limits."""
    document: dict[str, object] = {}
    if spec.schedules is not UNSET:
        document["schedules"] = list(spec.schedules)
    elif spec.every_us is not UNSET:
        document["every"] = format_duration_us(spec.every_us)
        if spec.anchor_us is not UNSET:
            document["anchor"] = format_us(spec.anchor_us)
    elif spec.at_us is not UNSET:
        document["at"] = format_us(spec.at_us)
    elif spec.schedule:
        document["schedule"] = spec.schedule
    if spec.active is not UNSET:
        window = {"from": spec.active.from_us, "until": spec.active.until_us}
        document["active"] = {key: format_us(us) for key, us in window.items() if us}
    if spec.max_runs is not UNSET:
        document["max_runs"] = spec.max_runs
    if spec.pause_after_failures is not UNSET:
        document["pause_after_failures"] = spec.pause_after_failures
    if spec.after is not UNSET:
        document["after"] = list(spec.after)
    if spec.deadline_us is not UNSET:
        document["deadline"] = format_duration_us(spec.deadline_us)
    return document


def _misfire_document(misfire: MisfirePolicy, full: bool) -> dict[str, object]:
    document: dict[str, object] = {}
    if full or misfire.policy != _DEFAULT_MISFIRE.policy:
        document["policy"] = _plain(misfire.policy)
    if full or misfire.grace_us != _DEFAULT_MISFIRE.grace_us:
        document["grace"] = format_duration_us(misfire.grace_us)
    if full or misfire.max_catch_up != _DEFAULT_MISFIRE.max_catch_up:
        document["max_catch_up"] = misfire.max_catch_up
    return document


def _retry_document(retry: RetryPolicy, full: bool) -> dict[str, object]:
    document: dict[str, object] = {}
    if full or retry.max_attempts != _DEFAULT_RETRY.max_attempts:
        document["max_attempts"] = retry.max_attempts
    backoff = {
        "initial": format_duration_us(retry.backoff_initial_us),
        "max": format_duration_us(retry.backoff_max_us),
        "multiplier": retry.backoff_multiplier,
    }
    if not full:
        defaults = {
            "initial": format_duration_us(_DEFAULT_RETRY.backoff_initial_us),
            "max": format_duration_us(_default_backoff_max(retry.backoff_initial_us)),
            "multiplier": _DEFAULT_RETRY.backoff_multiplier,
        }
        backoff = {key: value for key, value in backoff.items() if value != defaults[key]}
    if list(backoff) == ["initial"]:
        document["backoff"] = backoff["initial"]  # the short form: backoff: 30s
    elif backoff:
        document["backoff"] = backoff
    if full or retry.within_us:
        document["within"] = format_duration_us(retry.within_us)
    if retry.final_exit_codes is not UNSET:
        document["final_exit_codes"] = list(retry.final_exit_codes)
    return document


_DEFAULT_HTTP = HttpTarget(url="")


def http_document(http: HttpTarget, full: bool = False) -> dict[str, object]:
    """`target.http` of a job document: the URL, then what differs from the defaults."""
    document: dict[str, object] = {"url": http.url}
    if full or http.method != _DEFAULT_HTTP.method:
        document["method"] = http.method
    if full or http.headers:
        document["headers"] = dict(http.headers)
    if full or http.body:
        document["body"] = http.body
    if http.timeout_us:
        document["timeout"] = format_duration_us(http.timeout_us)
    if full or http.success_codes:
        document["success_codes"] = list(http.success_codes)
    if full or http.follow_redirects:
        document["follow_redirects"] = http.follow_redirects
    return document
