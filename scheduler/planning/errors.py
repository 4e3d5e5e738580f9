"""The one exception type of the planning package."""

from __future__ import annotations


class ScheduleError(ValueError):
    """A schedule, time zone or DST option that cannot be accepted.

    ``field`` names what was wrong ("schedule", "timezone", "dst" for either DST option,
    "after", "n") so that an API can point at the offending input; ``message`` says why and,
    for DST options, names the option.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"invalid {field}: {message}")

    def __reduce__(self):
        # Exceptions pickle through their args by default; ours has two named ones.
        return (type(self), (self.field, self.message))
