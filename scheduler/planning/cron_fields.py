"""Parsing and validation of cron expressions into sets of allowed wall-clock values.

Accepted forms:

- 5 fields: ``minute hour day-of-month month day-of-week``;
- 6 fields with SECONDS FIRST: ``second minute hour day-of-month month day-of-week``, the way
  Quartz, Spring and Dkron write them (``*/5 * * * * *`` is every 5 seconds). croniter's own
  6-field form puts seconds last; we do not accept that reading;
- the aliases ``@yearly @annually @monthly @weekly @daily @midnight @hourly``.

Each field is a comma list of ``*``, ``N``, ``N-M``, ``*/S``, ``N-M/S`` or ``N/S`` (N to the
field's maximum, every S). Months and weekdays take English three-letter names. Weekdays are
numbered the Unix way, 0-7 with 0 and 7 both Sunday (Quartz's 1-7 numbering is NOT used); a
weekday range ending in Sunday (``fri-sun``, ``5-0``) reads as ending in 7. ``?`` is accepted
in the day fields as a synonym of ``*``.

Refused with a reason: 7 fields (years), expressions longer than 200 characters, croniter's
hashed/random forms (``H``, ``R``), ``@reboot``, Quartz's ``L``/``W``/``#`` modifiers, steps of 0
or wider than the field, reversed ranges and out-of-range values. Whether an expression can
ever fire is checked elsewhere (it needs the calendar).

Day-of-month and day-of-week combine the way Vixie cron and cronie do: if either field starts
with ``*`` (or ``?``) a day must match both, otherwise a day matching either is enough.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ScheduleError

MAX_EXPRESSION_CHARS = 200

_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_MONTH_NAMES = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}
_WEEKDAY_NAMES = {name: number for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}

# Anything else is a typo or a dialect we do not speak; say which character.
_ALLOWED_CHARS = re.compile(r"[0-9A-Za-z*?,/\-@#() \t]*")


@dataclass(frozen=True)
class _FieldSpec:
    name: str
    low: int
    high: int
    names: dict[str, int]
    allows_question_mark: bool = False

    @property
    def width(self) -> int:
        return self.high - self.low + 1


_SECOND = _FieldSpec("second", 0, 59, {})
_MINUTE = _FieldSpec("minute", 0, 59, {})
_HOUR = _FieldSpec("hour", 0, 23, {})
_DAY_OF_MONTH = _FieldSpec("day-of-month", 1, 31, {}, allows_question_mark=True)
_MONTH = _FieldSpec("month", 1, 12, _MONTH_NAMES)
# 7 is accepted as Sunday and folded onto 0 after parsing; steps are judged on 7 days.
_DAY_OF_WEEK = _FieldSpec("day-of-week", 0, 7, _WEEKDAY_NAMES, allows_question_mark=True)


@dataclass(frozen=True)
class CronFields:
    """The allowed values of each field, as sorted tuples, plus the flags cron semantics need."""

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days_of_month: tuple[int, ...]
    months: tuple[int, ...]
    days_of_week: tuple[int, ...]  # 0 = Sunday .. 6 = Saturday
    day_of_month_starred: bool
    day_of_week_starred: bool
    has_seconds: bool
    # cronie's rule: a job is "fixed-time" unless its minute or hour field starts with '*'.
    # The seconds field does not take part: `*/10 30 2 * * *` is still a 02:30 job.
    is_fixed_time: bool
    canonical: str  # the six fields, seconds first, after alias expansion

    @property
    def day_rule(self) -> tuple:
        """Everything that decides which calendar days match, as one hashable key."""
        return (
            self.days_of_month,
            self.days_of_week,
            self.day_of_month_starred or self.day_of_week_starred,
        )


def _fail(message: str) -> ScheduleError:
    return ScheduleError("schedule", message)


def _parse_value(token: str, spec: _FieldSpec) -> int:
    lowered = token.lower()
    if lowered in spec.names:
        return spec.names[lowered]
    if token.isdigit() and token.isascii():
        value = int(token)
        if not spec.low <= value <= spec.high:
            raise _fail(f"{spec.name} value {value} is outside {spec.low}-{spec.high}")
        return value
    upper = token.upper()
    if upper.startswith("H") and (len(upper) == 1 or upper[1] == "("):
        raise _fail("hashed 'H' expressions are not supported; write explicit values")
    if upper.startswith("R") and (len(upper) == 1 or upper[1] == "("):
        raise _fail("random 'R' expressions are not supported; write explicit values")
    if "#" in token or upper.endswith(("L", "W")) or upper == "LW":
        raise _fail(f"the Quartz modifiers L, W and # are not supported (got {token!r})")
    raise _fail(f"{token!r} is not a valid {spec.name} value")


def _parse_step(text: str, spec: _FieldSpec, item: str) -> int:
    if not (text.isdigit() and text.isascii()):
        raise _fail(f"step {text!r} in {spec.name} item {item!r} is not a number")
    step = int(text)
    width = 7 if spec is _DAY_OF_WEEK else spec.width
    if step == 0:
        raise _fail(f"step 0 in {spec.name} item {item!r} would never advance")
    if step > width:
        raise _fail(f"step {step} in {spec.name} item {item!r} is wider than the field ({width})")
    return step


def _parse_item(item: str, spec: _FieldSpec) -> set[int]:
    if not item:
        raise _fail(f"empty item in {spec.name} field")
    base, slash, step_text = item.partition("/")
    step = _parse_step(step_text, spec, item) if slash else 1
    if base in ("*", "?"):
        if base == "?" and not spec.allows_question_mark:
            raise _fail(f"'?' is only allowed in the day fields, not in {spec.name}")
        low, high = spec.low, spec.high
        if spec is _DAY_OF_WEEK:
            high = 6  # '*' means each weekday once, not Sunday twice
    elif "-" in base:
        low_text, _, high_text = base.partition("-")
        low, high = _parse_value(low_text, spec), _parse_value(high_text, spec)
        if spec is _DAY_OF_WEEK and high == 0 and low > 0:
            high = 7  # 'fri-sun' / '5-0' mean Friday through Sunday
        if low > high:
            raise _fail(f"{spec.name} range {item!r} runs backwards")
    else:
        low = _parse_value(base, spec)
        # 'N/S' (no range) means from N to the end of the field, every S, as croniter reads it.
        high = (6 if spec is _DAY_OF_WEEK else spec.high) if slash else low
    return set(range(low, high + 1, step))


def _parse_field(text: str, spec: _FieldSpec) -> tuple[int, ...]:
    values: set[int] = set()
    for item in text.split(","):
        values |= _parse_item(item, spec)
    if spec is _DAY_OF_WEEK and 7 in values:
        values.discard(7)
        values.add(0)
    return tuple(sorted(values))


def parse_cron(expr: str) -> CronFields:
    """Parse ``expr`` or raise ScheduleError(field="schedule") with the reason."""
    if not isinstance(expr, str):
        raise _fail(f"expected a string, got {type(expr).__name__}")
    if len(expr) > MAX_EXPRESSION_CHARS:
        raise _fail(f"expression is {len(expr)} characters long; the limit is {MAX_EXPRESSION_CHARS}")
    text = expr.strip()
    if not text:
        raise _fail("expression is empty")
    if not _ALLOWED_CHARS.fullmatch(text):
        bad = next(ch for ch in text if not _ALLOWED_CHARS.fullmatch(ch))
        raise _fail(f"unexpected character {bad!r}")
    if text.startswith("@"):
        alias = text.lower()
        if alias == "@reboot":
            raise _fail("@reboot has no instant to schedule; it is not supported")
        if alias not in _ALIASES:
            known = ", ".join(sorted(_ALIASES))
            raise _fail(f"unknown alias {text!r}; known aliases: {known}")
        text = _ALIASES[alias]
    fields = text.split()
    if len(fields) == 7:
        raise _fail("7 fields: a year field is not supported; use 5 fields or 6 with seconds first")
    if len(fields) not in (5, 6):
        raise _fail(
            f"expected 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, got {len(fields)}"
        )
    has_seconds = len(fields) == 6
    if not has_seconds:
        fields = ["0", *fields]
    second, minute, hour, day_of_month, month, day_of_week = fields
    return CronFields(
        seconds=_parse_field(second, _SECOND),
        minutes=_parse_field(minute, _MINUTE),
        hours=_parse_field(hour, _HOUR),
        days_of_month=_parse_field(day_of_month, _DAY_OF_MONTH),
        months=_parse_field(month, _MONTH),
        days_of_week=_parse_field(day_of_week, _DAY_OF_WEEK),
        day_of_month_starred=day_of_month.startswith(("*", "?")),
        day_of_week_starred=day_of_week.startswith(("*", "?")),
        has_seconds=has_seconds,
        is_fixed_time=not (minute.startswith("*") or hour.startswith("*")),
        canonical=" ".join(fields),
    )
