"""Logging for node processes: today's text lines, or JSON lines for log pipelines.

    configure_logging("INFO", "json", "n1")
    log.info("claimed", extra=run_fields("nightly", scheduled_us, token=42, epoch=3))

JSON: one object per line with `ts` (UTC, ISO 8601, milliseconds), `level`, `logger`,
`node`, `message`, then every `extra` field as given (run_key, job_id, token, epoch...),
and `exc` / `stack` when there is a traceback. Values JSON cannot hold are written with
str(). Text: `%(asctime)s NODE %(levelname)s %(name)s: %(message)s` as before, with any
extra fields appended as ` key=value`. Either way one record is one line with no raw control
characters: caller text in a message cannot forge a line or reach a terminal
(scheduler.security.safetext).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone
from typing import TextIO

from scheduler.security.safetext import json_line, shown_text

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s {node} %(levelname)s %(name)s: %(message)s"

# Attributes every LogRecord has: anything else on a record came in through `extra`.
_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


def extra_fields(record: logging.LogRecord) -> dict:
    """The `extra={...}` fields of a record, in the order they were given."""
    return {key: value for key, value in vars(record).items() if key not in _RESERVED and not key.startswith("_")}


def run_fields(job_id: str, scheduled_us: int, token: int | None = None, epoch: int | None = None, **more) -> dict:
    """`extra` fields naming a run: run_key (`job@2026-12-01T18:59:00Z`, as the CLI prints it), job_id, and more."""
    from scheduler.planning.runkeys import readable_run_key

    fields = {"run_key": readable_run_key(job_id, scheduled_us), "job_id": job_id}
    if token is not None:
        fields["token"] = token
    if epoch is not None:
        fields["epoch"] = epoch
    fields.update(more)
    return fields


class JsonFormatter(logging.Formatter):
    def __init__(self, node_id: str) -> None:
        super().__init__()
        self._node_id = node_id

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "node": self._node_id,
            "message": record.getMessage(),
        }
        for key, value in extra_fields(record).items():
            line.setdefault(key, value)  # an extra field never overwrites the fixed ones
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json_line(json.dumps(line, default=str, ensure_ascii=False))


class TextFormatter(logging.Formatter):
    def __init__(self, node_id: str) -> None:
        super().__init__(TEXT_FORMAT.format(node=node_id.replace("%", "%%")))

    def formatMessage(self, record: logging.LogRecord) -> str:
        # A message may carry caller text (an alert's error): a newline in it would start a line
        # that reads like the node's own, an escape sequence would reach the operator's terminal.
        message = record.message
        record.message = shown_text(message)
        try:
            text = super().formatMessage(record)
        finally:
            record.message = message
        fields = extra_fields(record)
        if fields:
            text += " " + " ".join(f"{key}={_text_value(value)}" for key, value in fields.items())
        return text


def _text_value(value) -> str:
    text = str(value)
    return (
        json.dumps(text) if (not text or any(c.isspace() or c in '"=' or not c.isprintable() for c in text)) else text
    )


def configure_logging(level: str | int = "INFO", fmt: str = "text", node_id: str = "", stream: TextIO | None = None):
    """Send every logger's records to `stream` (stderr) as text or JSON lines; replaces earlier handlers."""
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter(node_id) if fmt == "json" else TextFormatter(node_id))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    logging.captureWarnings(True)
    return handler
