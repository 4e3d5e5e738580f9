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

Quartz's day modifiers, with Quartz's meaning (see ``day_modifiers``):

- day-of-month: ``L`` the last day of the month, ``L-n`` n days before it (n 1-30), ``nW`` the
  weekday (Mon-Fri) nearest day n within the month, ``LW`` the last weekday, ``L-nW`` the
  weekday nearest ``L-n``;
- day-of-week: ``d#k`` the k-th weekday d of the month (k 1-5; a month without a 5th one does
  not fire), ``dL`` the last weekday d (``5#3``, ``fri#3``, ``5L``, ``friL``; 0 and 7 Sunday).

Unlike Quartz, a modifier is an ordinary item of its field's comma list: ``1,15,L`` is the 1st,
the 15th and the last day; ``mon#1,friL`` the first Monday and the last Friday. A field allows
the union of the dates its items allow. A modifier takes a single day, so ranges and steps of
modifiers (``1-5W``, ``L/2``, ``mon-fri#2``) are refused, and so is ``L`` alone in day-of-week
(Quartz's Saturday).

Refused with a reason: 7 fields (years), expressions longer than 200 characters, croniter's
hashed/random forms (``H``, ``R``), ``@reboot``, modifiers outside the day fields, steps of 0 or
wider than the field, reversed ranges and out-of-range values. Whether an expression can ever
fire is checked elsewhere (it needs the calendar).

Day-of-month and day-of-week combine the way Vixie cron and cronie do: if either field starts
with ``*`` (or ``?``) a day must match both, otherwise a day matching either is enough. A
modifier only changes which dates its field allows, so the rule applies unchanged:
``0 9 * * 5#3`` is the third Friday, ``0 9 L * *`` the last day, but ``0 9 L * 5`` is the last
day and every Friday, and ``0 9 L * 5#3`` the last day and the third Friday. Write ``?`` or
``*`` in the other field to mean "any".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .day_modifiers import (
    NO_MODIFIERS,
    DayModifiers,
    is_day_of_month_modifier,
    is_day_of_week_modifier,
    parse_day_of_month_item,
    parse_day_of_week_item,
)
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

# L, 5L, 15W, LW, L-3, L-3W: answered as a misplaced modifier rather than a bad value.
_LOOKS_LIKE_A_MODIFIER = re.compile(r"\d*[LW]|LW|L-\d*W?")
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
    # L, W and # items of the day fields; days_of_month/days_of_week hold only the plain ones.
    modifiers: DayModifiers = NO_MODIFIERS

    @property
    def day_rule(self) -> tuple:
        """Everything that decides which calendar days match, as one hashable key."""
        return (
            self.days_of_month,
            self.days_of_week,
            self.day_of_month_starred or self.day_of_week_starred,
            self.modifiers,
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
    # Only what looks like a modifier is answered as one: 'july' is a bad month, not an L.
    if spec is _DAY_OF_WEEK and "W" in upper and _LOOKS_LIKE_A_MODIFIER.fullmatch(upper):
        raise _fail(f"{token!r}: W belongs to day-of-month (e.g. 15W); day-of-week takes d#k and dL (e.g. fri#3, 5L)")
    if spec is _DAY_OF_MONTH and "#" in token:
        raise _fail(f"{token!r}: # belongs to day-of-week (e.g. fri#3); day-of-month takes L, L-n, nW and LW")
    if "#" in token or _LOOKS_LIKE_A_MODIFIER.fullmatch(upper):
        raise _fail(
            f"{token!r}: the modifiers L, W and # are only allowed in day-of-month and day-of-week, not in {spec.name}"
        )
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


def _split_modifiers(text: str, spec: _FieldSpec) -> tuple[str, list[str]]:
    """The field's plain items (as field text, "" when none) and its modifier items."""
    is_modifier = is_day_of_month_modifier if spec is _DAY_OF_MONTH else is_day_of_week_modifier
    items = text.split(",")
    if "" in items:
        raise _fail(f"empty item in {spec.name} field")
    plain = ",".join(item for item in items if not is_modifier(item))
    return plain, [item for item in items if is_modifier(item)]


def _parse_day_of_month(text: str) -> tuple[tuple[int, ...], dict[str, tuple[int, ...]]]:
    plain, items = _split_modifiers(text, _DAY_OF_MONTH)
    found: dict[str, set[int]] = {"last": set(), "nearest": set(), "last_weekday": set()}
    for item in items:
        kind, value = parse_day_of_month_item(item)
        found[kind].add(value)
    values = _parse_field(plain, _DAY_OF_MONTH) if plain else ()
    return values, {kind: tuple(sorted(days)) for kind, days in found.items()}


def _parse_day_of_week(text: str) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...], tuple[int, ...]]:
    plain, items = _split_modifiers(text, _DAY_OF_WEEK)
    nth: set[tuple[int, int]] = set()
    last: set[int] = set()
    for item in items:
        kind, weekday, which = parse_day_of_week_item(item, lambda token: _parse_value(token, _DAY_OF_WEEK))
        if kind == "nth":
            nth.add((weekday, which))
        else:
            last.add(weekday)
    values = _parse_field(plain, _DAY_OF_WEEK) if plain else ()
    return values, tuple(sorted(nth)), tuple(sorted(last))


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
    # Fields are read left to right, so the first bad field is the one reported.
    seconds = _parse_field(second, _SECOND)
    minutes = _parse_field(minute, _MINUTE)
    hours = _parse_field(hour, _HOUR)
    days_of_month, dom_modifiers = _parse_day_of_month(day_of_month)
    months = _parse_field(month, _MONTH)
    days_of_week, nth_weekdays, last_weekdays = _parse_day_of_week(day_of_week)
    modifiers = DayModifiers(
        last_day_offsets=dom_modifiers["last"],
        nearest_weekdays=dom_modifiers["nearest"],
        last_weekday_offsets=dom_modifiers["last_weekday"],
        nth_weekdays=nth_weekdays,
        last_weekdays=last_weekdays,
    )
    return CronFields(
        seconds=seconds,
        minutes=minutes,
        hours=hours,
        days_of_month=days_of_month,
        months=months,
        days_of_week=days_of_week,
        day_of_month_starred=day_of_month.startswith(("*", "?")),
        day_of_week_starred=day_of_week.startswith(("*", "?")),
        has_seconds=has_seconds,
        is_fixed_time=not (minute.startswith("*") or hour.startswith("*")),
        canonical=" ".join(fields),
        modifiers=modifiers if modifiers else NO_MODIFIERS,
    )


def uses_quartz_modifiers(expr: str) -> bool:
    """Whether ``expr`` is a valid expression using L, W or # (which need log format 3).

    An expression that does not parse answers False: it is refused on its own account.
    """
    return isinstance(expr, str) and _uses_quartz_modifiers(expr)


@lru_cache(maxsize=4096)
def _uses_quartz_modifiers(expr: str) -> bool:
    # Memoized: a file of many jobs holds a handful of distinct schedules.
    try:
        return bool(parse_cron(expr).modifiers)
    except ScheduleError:
        return False
