"""The run page's output: what each attempt wrote (stdout and stderr apart), and how it ended.

Output is caller text: always escaped. A stream of more than a few lines starts collapsed (its
last lines stay visible in the summary's count; one click shows the whole kept tail).
"""

from __future__ import annotations

from html import escape

from msgspec import UNSET

from scheduler.core.vocabulary import TargetKind

# A stream longer than this many lines starts collapsed.
OPEN_LINES = 8


def _text(value) -> str:
    return "" if value is UNSET else value


def ended_by(attempt, target_kind: str = "") -> str:
    """An attempt's exception type, HTTP status or exit code, as words ('' when it has none)."""
    if _text(attempt.exception_type):
        return f"exception {attempt.exception_type}"
    if attempt.http_status is not UNSET and attempt.http_status:
        return f"HTTP {attempt.http_status}"
    if attempt.exit_code or (target_kind == TargetKind.SHELL and attempt.outcome):
        return f"exit code {attempt.exit_code}"
    return ""


def stream_html(label: str, text: str) -> str:
    lines = text.splitlines()
    opened = " open" if len(lines) <= OPEN_LINES else ""
    count = f"{len(lines)} line{'s' if len(lines) != 1 else ''}"
    return (
        f'<details class="stream {label}"{opened}><summary>{label} <span class="muted">({count})</span></summary>'
        f'<pre class="output-tail">{escape(text)}</pre></details>'
    )


def has_attempt_output(run, last_only: bool = False) -> bool:
    """Whether any attempt of `run` (or its last one) recorded a stream."""
    attempts = run.attempts[-1:] if last_only else run.attempts
    return any(_text(a.stdout_tail) or _text(a.stderr_tail) for a in attempts)


def attempts_output_html(run, target_kind: str, details: bool, hidden: str) -> str:
    """One block per attempt: its header (outcome, how it ended, error), then its streams."""
    blocks = []
    for attempt in run.attempts:
        detail = ended_by(attempt, target_kind)
        head = f"attempt {attempt.number}: {escape(attempt.outcome or 'running')}"
        head += f", {escape(detail)}" if detail else ""
        error = f'<p class="muted">{escape(attempt.error)}</p>' if attempt.error else ""
        out, err = _text(attempt.stdout_tail), _text(attempt.stderr_tail)
        if (out or err) and not details:
            body = f"<p>{hidden}</p>"
        elif out or err:
            body = "".join(stream_html(label, text) for label, text in (("stdout", out), ("stderr", err)) if text)
        else:
            body = '<p class="muted">No output recorded for this attempt.</p>'
        blocks.append(
            f'<section class="attempt-output" id="attempt-{attempt.number}"><h3>{head}</h3>{error}{body}</section>'
        )
    return "".join(blocks)
