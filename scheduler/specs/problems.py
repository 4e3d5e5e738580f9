"""How a problem with a job file or spec is reported: which job, which field, what is wrong.

Fields are named as the document names them ("class", "retry.backoff.initial"), also for specs
that did not come from a file, so one message reads the same from `raftcron apply` and ApplyJobs.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong with one job ("" job_id: with the file as a whole)."""

    job_id: str
    field: str
    message: str

    def __str__(self) -> str:
        job = f"job {self.job_id!r}" if self.job_id else ""
        field = f"field {self.field!r}" if self.field else ""
        where = " ".join(part for part in (job, field) if part)
        return f"{where}: {self.message}" if where else self.message


class SpecError(ValueError):
    """Every problem found in a job file (or spec); nothing was accepted."""

    def __init__(self, problems: list[SpecProblem], source: str = "<input>") -> None:
        self.problems = list(problems)
        self.source = source
        super().__init__("\n".join(str(problem) for problem in self.problems))


def _suggestion(word: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word.lower(), [k for k in known if k], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _short(text: str, limit: int = 64) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
