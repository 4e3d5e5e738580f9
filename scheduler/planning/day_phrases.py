"""Which days a cron expression fires on, as English: "on the third Friday of the month"."""

from __future__ import annotations

from .cron_fields import CronFields

_WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_ORDINAL_WORDS = ("first", "second", "third", "fourth", "fifth")


def _nth_word(number: int) -> str:
    return _ORDINAL_WORDS[number - 1]


def _ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _days_before_last(offset: int) -> str:
    if offset == 1:
        return "the day before the last day of the month"
    return f"the last day of the month minus {offset} days"


def _join(phrases: list[str], word: str) -> str:
    if len(phrases) <= 1:
        return "".join(phrases)
    return f"{', '.join(phrases[:-1])} {word} {phrases[-1]}"


def _day_of_month_phrases(fields: CronFields, restricts: bool) -> list[str]:
    modifiers = fields.modifiers
    phrases = []
    if fields.days_of_month and restricts:
        days = ", ".join(_ordinal(day) for day in fields.days_of_month)
        phrases.append(f"the {days}")
    for offset in modifiers.last_day_offsets:
        phrases.append("the last day of the month" if offset == 0 else _days_before_last(offset))
    for day in modifiers.nearest_weekdays:
        phrases.append(f"the weekday nearest the {_ordinal(day)}")
    for offset in modifiers.last_weekday_offsets:
        phrases.append(
            "the last weekday of the month" if offset == 0 else f"the weekday nearest {_days_before_last(offset)}"
        )
    return phrases


def _day_of_week_phrases(fields: CronFields, restricts: bool) -> list[str]:
    modifiers = fields.modifiers
    phrases = []
    if fields.days_of_week and restricts:
        phrases.append(f"every {_join([_WEEKDAYS[day] for day in fields.days_of_week], 'and')}")
    for weekday, nth in modifiers.nth_weekdays:
        phrases.append(f"the {_nth_word(nth)} {_WEEKDAYS[weekday]} of the month")
    for weekday in modifiers.last_weekdays:
        phrases.append(f"the last {_WEEKDAYS[weekday]} of the month")
    return phrases


def describe_days(fields: CronFields) -> str:
    """The days an expression fires on, e.g. "on the last day of the month"; "" for every day.

    Follows the Vixie rule: when either field starts with ``*`` a day must match both, so
    the other field's words are joined with "that is also"; otherwise with "or".
    """
    restricts_month_days = len(fields.days_of_month) < 31 or not fields.day_of_month_starred
    restricts_weekdays = len(fields.days_of_week) < 7 or not fields.day_of_week_starred
    by_month = _day_of_month_phrases(fields, restricts_month_days)
    by_week = _day_of_week_phrases(fields, restricts_weekdays)
    month_text, week_text = _join(by_month, "or"), _join(by_week, "or")
    if not (month_text or week_text):
        return ""
    if not (month_text and week_text):
        return f"on {month_text or week_text}"
    if fields.day_of_month_starred or fields.day_of_week_starred:
        return f"on {month_text} that is also {week_text}"
    return f"on {month_text}, or on {week_text}"
