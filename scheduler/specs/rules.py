"""The rules on a spec's values: `validate_spec`, the one set the job file reader and the
ApplyJobs servicer both run, and the limits and defaults they are stated in.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata

from msgspec import UNSET

from scheduler.core.dependencies import MAX_PARENTS
from scheduler.core.model import ActiveWindow, HistoryPolicy, JobSpec, MisfirePolicy, Resource, RetryPolicy
from scheduler.core.vocabulary import DstGap, DstRepeat, Misfire, Overlap, TargetKind
from scheduler.planning import ScheduleError, compile_schedule, format_us
from scheduler.planning.durations import (
    DAY,
    EXAMPLES,
    DurationError,
    format_duration_us,
    parse_duration_us,
    type_name,
)
from scheduler.planning.slots import LAST_SLOT_US, MAX_SCHEDULES, is_manual_only
from scheduler.specs.calendars import calendar_rule_problems
from scheduler.specs.http_target import http_payload_problem, http_target_problems
from scheduler.specs.payload import _payload_json_problem
from scheduler.specs.problems import SpecProblem, _short, _suggestion

MAX_NAME_CHARS = 128
MAX_OWNER_CHARS = 256
MAX_SHELL_BYTES = 8 * 1024
MAX_SCHEDULE_CHARS = 256  # also bounds the memo of compiled schedules
MAX_TIMEZONE_CHARS = 64
MAX_TIMEOUT_US = 7 * DAY
MAX_BACKOFF_US = DAY
MAX_WITHIN_US = 365 * DAY
MAX_GRACE_US = 7 * DAY
MAX_JITTER_US = DAY
MIN_EVERY_US = 1_000_000
MAX_EVERY_US = 365 * DAY
MAX_RUNS_LIMIT = 1_000_000_000
MAX_PAUSE_AFTER_FAILURES = 10_000
# A deadline is checked once; beyond a week a missing run is better caught by `missed` streaks.
MAX_DEADLINE_US = 7 * DAY
# The ways a job fires, as YAML keys; a job uses at most one (none: manual-only).
WAYS_TO_FIRE = ("schedule", "schedules", "every", "at")
# Unicode's categories Cc (C0, DEL, C1) and Cs (surrogates): what a caller's string may not hold.
# A scan in C, not a category lookup per character: ApplyJobs checks six strings of every job.
_CONTROL_OR_SURROGATE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")

TARGET_KINDS = tuple(TargetKind)
MISFIRE_POLICIES = tuple(Misfire)
DST_GAP_RULES = tuple(DstGap)
DST_REPEAT_RULES = tuple(DstRepeat)
OVERLAP_RULES = tuple(Overlap)

# Run history retention (see scheduler/core/retention.py): YAML key -> HistoryPolicy field.
_HISTORY_KEYS = {
    "keep": "keep_runs", "keep_for": "max_age_us", "keep_failed": "keep_failed_runs",
    "keep_failed_for": "failed_max_age_us",
}  # fmt: skip
MAX_HISTORY_RUNS = 1_000_000
MAX_HISTORY_AGE_US = 3650 * DAY
MAX_RESOURCE_LIMIT = 1_000_000
MAX_USES = 16
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-")

_DEFAULT = JobSpec(id="", schedule="", target_kind=TargetKind.HANDLER, target="")
_DEFAULT_RETRY = RetryPolicy()
_DEFAULT_HISTORY = HistoryPolicy()
_DEFAULT_MISFIRE = MisfirePolicy()


def validate_spec(spec: JobSpec) -> list[SpecProblem]:
    """Every problem with an already-built spec; an empty list when it may be applied."""
    label = spec.id if isinstance(spec.id, str) and spec.id else "?"
    return [SpecProblem(_short(label), field, message) for field, message in _spec_problems(spec)]


def _spec_problems(spec: JobSpec) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []

    def check(field: str, message: str | None) -> None:
        if message:
            found.append((field, message))

    check("id", _name_problem(spec.id))
    check("schedule", _string_problem(spec.schedule, max_chars=MAX_SCHEDULE_CHARS))
    check("timezone", _string_problem(spec.timezone, allow_empty=False, max_chars=MAX_TIMEZONE_CHARS))
    if spec.target_kind == TargetKind.HANDLER:
        check("target", _name_problem(spec.target, what="handler name "))
    elif spec.target_kind == TargetKind.SHELL:
        check("target", _shell_problem(spec.target))
    elif spec.target_kind == TargetKind.HTTP:
        found.extend(http_target_problems(spec.http, spec.target, spec.timeout_us))
        check("payload", http_payload_problem(spec.http, spec.payload_json))
    else:
        check("target", f"kind must be one of {_choices(TARGET_KINDS, spec.target_kind)}")
    if spec.http is not UNSET and spec.target_kind != TargetKind.HTTP:
        check("target", f"a {spec.target_kind} job has no HTTP request")
    check("owner", _string_problem(spec.owner, max_chars=MAX_OWNER_CHARS))
    check("class", _name_problem(spec.job_class))
    check("timeout", _duration_problem(spec.timeout_us, 1, MAX_TIMEOUT_US))
    if isinstance(spec.retry, RetryPolicy):
        found.extend(_shared_record_problems(spec.retry, _retry_problems))
    else:
        check("retry", f"must be a retry policy, not {type_name(spec.retry)}")
    check("priority", _int_problem(spec.priority, -1000, 1000))
    check("payload", _payload_json_problem(spec.payload_json))
    if isinstance(spec.misfire, MisfirePolicy):
        found.extend(_shared_record_problems(spec.misfire, _misfire_problems))
    else:
        check("misfire", f"must be a misfire policy, not {type_name(spec.misfire)}")
    check("dst.gap", _choice_problem(spec.dst_gap, ("", *DST_GAP_RULES)))
    check("dst.repeat", _choice_problem(spec.dst_repeat, ("", *DST_REPEAT_RULES)))
    check("jitter", _jitter_problem(spec.jitter))
    check("overlap", _choice_problem(spec.overlap, OVERLAP_RULES))
    if not isinstance(spec.paused, bool):
        check("paused", f"must be true or false, not {type_name(spec.paused)}")
    check("uses", _uses_problem(spec.uses))
    found.extend(_shared_record_problems(spec.history, _history_problems))
    found.extend(_ways_to_fire_problems(spec))
    if spec.calendar:
        found.extend(calendar_rule_problems(spec.calendar, _name_problem))
        if not spec.schedule:
            found.append(
                ("calendar", "works with one `schedule:` (not with schedules, every, at or a manual-only job)")
            )
    # The schedule is compiled only from parts that passed their own checks.
    bad = {field for field, _ in found}
    if not bad & {"schedule", "timezone", "dst.gap", "dst.repeat"} and spec.schedule:
        check(*_schedule_problem(spec.schedule, spec.timezone, spec.dst_gap, spec.dst_repeat))
    # Each entry that passed its own checks is compiled (a repeat is reported once, as a repeat).
    listed = spec.schedules is not UNSET and "schedules" not in bad
    if listed and not bad & {"timezone", "dst.gap", "dst.repeat"}:
        for position, expr in enumerate(spec.schedules):  # type: ignore[arg-type]
            if f"schedules[{position}]" not in bad:
                field, message = _schedule_problem(expr, spec.timezone, spec.dst_gap, spec.dst_repeat)
                check(f"schedules[{position}]" if field == "schedule" else field, message)
    return found


def ways_to_fire(spec: JobSpec) -> list[str]:
    """The YAML keys of the ways to fire a spec uses (at most one is allowed)."""
    used = [
        ("schedule", bool(spec.schedule) if isinstance(spec.schedule, str) else True),
        ("schedules", spec.schedules is not UNSET),
        ("every", spec.every_us is not UNSET),
        ("at", spec.at_us is not UNSET),
    ]
    return [key for key, is_used in used if is_used]


def _ways_to_fire_problems(spec: JobSpec) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    used = ways_to_fire(spec)
    if len(used) > 1:
        found.append((used[1], f"use one of {', '.join(WAYS_TO_FIRE)}, not {' and '.join(used)} together"))
    if spec.schedules is not UNSET:
        found.extend(_schedules_problems(spec.schedules))
    if spec.every_us is not UNSET:
        low, high = format_duration_us(MIN_EVERY_US), format_duration_us(MAX_EVERY_US)
        if _duration_problem(spec.every_us, MIN_EVERY_US, MAX_EVERY_US):
            found.append(("every", f"must be at least {low} and at most {high}, got {_shown_duration(spec.every_us)}"))
    if spec.anchor_us is not UNSET:
        if spec.every_us is UNSET:
            found.append(("anchor", "is the start of an `every:` interval; this job has no `every:`"))
        found.extend(_instant_problems("anchor", spec.anchor_us))
    if spec.at_us is not UNSET:
        found.extend(_instant_problems("at", spec.at_us))
    manual = isinstance(spec.schedule, str) and is_manual_only(spec)
    if spec.active is not UNSET:
        found.extend(_active_problems(spec, manual))
    if spec.max_runs is not UNSET:
        check = _int_problem(spec.max_runs, 1, MAX_RUNS_LIMIT)
        if check:
            found.append(("max_runs", check))
        elif manual:
            found.append(("max_runs", "counts scheduled runs; a job without a schedule has none (it is manual-only)"))
    if spec.pause_after_failures is not UNSET:
        check = _int_problem(spec.pause_after_failures, 1, MAX_PAUSE_AFTER_FAILURES)
        if check:
            found.append(("pause_after_failures", check))
    if spec.after is not UNSET:
        found.extend(_after_problems(spec, used))
    if spec.deadline_us is not UNSET:
        check = _duration_problem(spec.deadline_us, 1, MAX_DEADLINE_US)
        if check:
            found.append(("deadline", check))
        elif manual:
            found.append(("deadline", "is measured from a scheduled slot; a job without a schedule has none"))
    return found


def _after_problems(spec: JobSpec, ways: list[str]) -> list[tuple[str, str]]:
    """`after:` names 1 to MAX_PARENTS other jobs; such a job runs on its parents' slots only
    (which parents exist, agree on a schedule and make no cycle is checked at apply)."""
    after = spec.after
    if not isinstance(after, (tuple, list)) or not after:
        return [("after", f"must be a job id or a list of 1 to {MAX_PARENTS} job ids, not {type_name(after)}")]
    naming = next((f"job id {problem}" for name in after if (problem := _name_problem(name))), None)
    if naming:
        return [("after", naming)]
    if len(after) > MAX_PARENTS or len(set(after)) != len(after):
        return [("after", f"must list at most {MAX_PARENTS} distinct job ids")]
    if spec.id in after:
        return [("after", "names the job itself")]
    if ways:
        return [(ways[0], "a job with `after:` runs on its parents' slots; it has no schedule of its own")]
    return []


def _shown_duration(us: object) -> str:
    return format_duration_us(us) if isinstance(us, int) and not isinstance(us, bool) and us >= 0 else repr(us)


def _schedules_problems(schedules: object) -> list[tuple[str, str]]:
    if not isinstance(schedules, (tuple, list)):
        return [("schedules", f"must be a list of cron expressions, not {type_name(schedules)}")]
    if not schedules:
        return [("schedules", "must list at least one cron expression (for none, leave it out: manual-only)")]
    if len(schedules) > MAX_SCHEDULES:
        return [("schedules", f"lists {len(schedules)} expressions; at most {MAX_SCHEDULES} are allowed")]
    found = []
    seen: dict[str, int] = {}
    for position, expr in enumerate(schedules):
        problem = _string_problem(expr, allow_empty=False, max_chars=MAX_SCHEDULE_CHARS)
        if problem:
            found.append((f"schedules[{position}]", problem))
        elif expr.strip() in seen:
            found.append((f"schedules[{position}]", f"repeats schedules[{seen[expr.strip()]}]"))
        else:
            seen[expr.strip()] = position
    return found


def _instant_problems(field: str, us: object) -> list[tuple[str, str]]:
    if isinstance(us, bool) or not isinstance(us, int):
        return [(field, f"must be an instant, not {type_name(us)}")]
    if not 0 <= us <= LAST_SLOT_US:
        return [(field, f"must be between 1970-01-01T00:00:00Z and {format_us(LAST_SLOT_US)}")]
    return []


def _active_problems(spec: JobSpec, manual: bool) -> list[tuple[str, str]]:
    window = spec.active
    if not isinstance(window, ActiveWindow):
        return [("active", f"must be a window {{from: INSTANT, until: INSTANT}}, not {type_name(window)}")]
    found = _instant_problems("active.from", window.from_us) + _instant_problems("active.until", window.until_us)
    if found:
        return found
    if not window.from_us and not window.until_us:
        return [("active", "needs `from:`, `until:` or both")]
    if window.from_us and window.until_us and window.until_us <= window.from_us:
        return [("active.until", f"must be after active.from ({format_us(window.from_us)})")]
    if manual:
        return [("active", "bounds scheduled slots; a job without a schedule has none (it is manual-only)")]
    return []


def _uses_problem(uses: object) -> str | None:
    if not isinstance(uses, (tuple, list)):
        return f"must be a list of resource names, not {type_name(uses)}"
    naming = next((f"resource {problem}" for name in uses if (problem := _name_problem(name))), None)
    if naming:
        return naming
    if len(uses) > MAX_USES or len(set(uses)) != len(uses):
        return f"must list at most {MAX_USES} distinct resource names"
    return None


def validate_resource(resource: Resource) -> list[SpecProblem]:
    """Problems with one resource declaration (job_id is empty: it belongs to the file)."""
    found = [
        ("resources", _name_problem(resource.name)),
        (f"resources.{resource.name}.max_concurrent", _int_problem(resource.max_concurrent, 0, MAX_RESOURCE_LIMIT)),
        (f"resources.{resource.name}.max_starts_per_s", _int_problem(resource.max_starts_per_s, 0, MAX_RESOURCE_LIMIT)),
    ]
    return [SpecProblem("", field, message) for field, message in found if message]


@functools.lru_cache(maxsize=4096)
def _schedule_problem(expr: str, timezone: str, gap: str, repeat: str) -> tuple[str, str | None]:
    # Memoized: a file of 100,000 jobs typically holds a handful of distinct schedules.
    try:
        compile_schedule(expr, timezone, gap or None, repeat or None)
    except ScheduleError as error:
        return (error.field or "schedule", error.message)
    return ("schedule", None)


# Specs converted from the wire share one record per distinct policy (rpc/convert.py), so a
# million applied jobs hold a handful: each is checked once. Keyed by identity and by the check
# (one object may sit in two fields of a spec built in code), with the record held so that its
# id cannot be reused while listed; cleared when full.
_SHARED_RECORD_PROBLEMS: dict[tuple[int, object], tuple[object, list[tuple[str, str]]]] = {}
_SHARED_RECORDS_MAX = 1024


def _shared_record_problems(record: object, problems_of) -> list[tuple[str, str]]:
    key = (id(record), problems_of)
    entry = _SHARED_RECORD_PROBLEMS.get(key)
    if entry is not None and entry[0] is record:
        return entry[1]
    found = problems_of(record)
    if len(_SHARED_RECORD_PROBLEMS) >= _SHARED_RECORDS_MAX:
        _SHARED_RECORD_PROBLEMS.clear()
    _SHARED_RECORD_PROBLEMS[key] = (record, found)
    return found


def _misfire_problems(misfire: MisfirePolicy) -> list[tuple[str, str]]:
    found = [
        ("misfire.policy", _choice_problem(misfire.policy, MISFIRE_POLICIES)),
        ("misfire.grace", _duration_problem(misfire.grace_us, 0, MAX_GRACE_US)),
        ("misfire.max_catch_up", _int_problem(misfire.max_catch_up, 0, 1000)),
    ]
    return [(field, message) for field, message in found if message]


def _history_problems(history: object) -> list[tuple[str, str]]:
    if not isinstance(history, HistoryPolicy):
        return [("history", f"must be a retention policy, not {type_name(history)}")]
    found = []
    for key, name in _HISTORY_KEYS.items():
        value = getattr(history, name)
        if name.endswith("_us"):
            problem = _duration_problem(value, 0, MAX_HISTORY_AGE_US)
        else:
            problem = _int_problem(value, 0, MAX_HISTORY_RUNS)
        if problem:
            found.append((f"history.{key}", problem))
    return found


def _retry_problems(retry: RetryPolicy) -> list[tuple[str, str]]:
    found = [
        ("retry.max_attempts", _int_problem(retry.max_attempts, 1, 100)),
        ("retry.backoff.initial", _duration_problem(retry.backoff_initial_us, 0, MAX_BACKOFF_US)),
        ("retry.backoff.max", _duration_problem(retry.backoff_max_us, 0, MAX_BACKOFF_US)),
        ("retry.backoff.multiplier", _number_problem(retry.backoff_multiplier, 1.0, 10.0)),
        ("retry.within", _duration_problem(retry.within_us, 0, MAX_WITHIN_US)),
    ]
    if retry.final_exit_codes is not UNSET:
        found.append(("retry.final_exit_codes", _exit_codes_problem(retry.final_exit_codes)))
    if not found[1][1] and not found[2][1] and retry.backoff_max_us < retry.backoff_initial_us:
        initial = format_duration_us(retry.backoff_initial_us)
        found[2] = ("retry.backoff.max", f"must not be less than the initial backoff ({initial})")
    return [(field, message) for field, message in found if message]


def _exit_codes_problem(codes: object) -> str | None:
    if not isinstance(codes, tuple) or not codes:
        return f"must be a non-empty list of exit codes, not {type_name(codes)}"
    if len(codes) > 32:
        return f"lists {len(codes)} exit codes; at most 32 are allowed"
    for code in codes:
        if type(code) is not int or not 1 <= code <= 255:
            return f"exit codes are whole numbers from 1 to 255 (0 is success), got {code!r}"
    if len(set(codes)) != len(codes):
        return "lists an exit code twice"
    return None


def _string_problem(value: object, *, allow_empty: bool = True, max_chars: int = 0) -> str | None:
    if not isinstance(value, str):
        hint = " (quote it)" if isinstance(value, (bool, int, float)) else ""
        hint += " (YAML reads unquoted yes/no/on/off as booleans)" if isinstance(value, bool) else ""
        return f"must be a string, not {type_name(value)}{hint}"
    if not value and not allow_empty:
        return "must not be empty"
    if max_chars and len(value) > max_chars:
        return f"is {len(value)} characters long; at most {max_chars} are allowed"
    if value.isascii() and value.isprintable():
        return None  # the usual id or name: no ASCII control character, and nothing else to look for
    found = _CONTROL_OR_SURROGATE.search(value)
    if found is None:
        return None
    char = found.group()
    if unicodedata.category(char) == "Cc":
        return f"contains the control character {char!r}"
    return f"contains a lone surrogate {char!r}"


def name_problem(value: object) -> str | None:
    """What is wrong with an id or a name (job, class, handler, resource); None if nothing."""
    return _name_problem(value)


def text_problem(value: object, max_chars: int) -> str | None:
    """What is wrong with one line of text (bounded, no control characters); None if nothing."""
    return _string_problem(value, max_chars=max_chars)


def _name_problem(value: object, what: str = "") -> str | None:
    problem = _string_problem(value, allow_empty=False, max_chars=MAX_NAME_CHARS)
    if problem:
        return what + problem
    if _NAME.fullmatch(value):  # type: ignore[arg-type]
        return None
    odd = next((char for char in value if char not in _NAME_CHARS), None)  # type: ignore[union-attr]
    rule = "ASCII letters, digits, '.', '_', ':' and '-', starting with a letter or digit"
    if odd is not None:
        return f"{what}{value!r} contains {odd!r}; allowed are {rule}"
    return f"{what}{value!r} must start with a letter or digit"


def _shell_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return f"shell command must be a string, not {type_name(value)}"
    if not value.strip():
        return "shell command must not be empty"
    if "\0" in value:
        return "shell command contains a NUL character"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return "shell command is not valid text (it contains a lone surrogate)"
    if size > MAX_SHELL_BYTES:
        return f"shell command is {size} bytes long; at most {MAX_SHELL_BYTES} (8 KiB) are allowed"
    return None


def _int_problem(value: object, low: int, high: int) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"must be a whole number, not {type_name(value)}"
    if not low <= value <= high:
        return f"must be between {low} and {high}, got {value}"
    return None


def _number_problem(value: object, low: float, high: float) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be a number, not {type_name(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if not low <= value <= high:  # exact for ints of any size, unlike a conversion to float
        return f"must be between {low:g} and {high:g}, got {_short(str(value), 20)}"
    return None


def _duration_problem(us: object, low: int, high: int) -> str | None:
    if isinstance(us, bool) or not isinstance(us, int):
        return f"must be a duration in microseconds, not {type_name(us)}"
    if not low <= us <= high:
        bound = "more than 0s" if low > 0 else "at least 0s"
        return f"must be {bound} and at most {format_duration_us(high)}, got {format_duration_us(us)}"
    return None


def _choice_problem(value: object, choices: tuple[str, ...]) -> str | None:
    if not isinstance(value, str):
        return f"must be one of {_choices(choices)}, not {type_name(value)}"
    return None if value in choices else f"must be one of {_choices(choices, value)}"


def _choices(choices: tuple[str, ...], got: object = None) -> str:
    text = ", ".join(repr(choice) for choice in choices)
    if got is not None:
        text += f"; got {got!r}{_suggestion(str(got), choices)}"
    return text


def _jitter_problem(value: object) -> str | None:
    if value == "auto" or value == "pinned":
        return None
    expected = f"must be 'auto', 'pinned' or a window of at most {format_duration_us(MAX_JITTER_US)}"
    if not isinstance(value, str):
        return f"{expected}, not {type_name(value)}"
    try:
        window = parse_duration_us(value, "jitter")
    except DurationError:
        return f"{expected} ({EXAMPLES}); got {value!r}{_suggestion(value, ('auto', 'pinned'))}"
    if window == 0:
        return "a zero window is written 'pinned'"
    if window > MAX_JITTER_US:
        return f"{expected}, got {format_duration_us(window)}"
    return None


def _default_backoff_max(initial_us: object) -> int:
    """An unset maximum backoff is 5m, or the initial backoff if that is longer (up to 1d)."""
    default = _DEFAULT_RETRY.backoff_max_us
    return min(max(default, initial_us), MAX_BACKOFF_US) if isinstance(initial_us, int) else default
