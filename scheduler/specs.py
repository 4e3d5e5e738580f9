"""Declarative job files -> validated JobSpecs, all or nothing.

A job file is YAML: a mapping `{jobs: [...]}` (or a bare list of jobs). Each job is a mapping;
`examples/jobs.yaml` shows every field. Reading a file collects *every* problem in it and
returns nothing if there is any: a file is applied whole or not at all.

One set of rules: the document reader only turns YAML shapes into a JobSpec (durations to
microseconds, `target` to kind + name, `payload` to canonical JSON, `class` to `job_class`)
and reports what it cannot turn; every rule on values lives in `validate_spec`, which the
server also runs on specs that arrive over gRPC. Problems name fields as the document does
("class", "timeout", "retry.backoff.initial"), also for specs that did not come from a file.
"""

from __future__ import annotations

import datetime
import difflib
import functools
import json
import math
import os
import re
import unicodedata
from dataclasses import dataclass

import yaml

from scheduler.core.model import HistoryPolicy, JobSpec, MisfirePolicy, Resource, RetryPolicy
from scheduler.planning import ScheduleError, compile_schedule
from scheduler.planning.durations import (
    DAY,
    EXAMPLES,
    DurationError,
    format_duration_us,
    parse_duration_us,
    type_name,
)

__all__ = [
    "SpecError",
    "SpecProblem",
    "canonical_payload_json",
    "format_duration_us",
    "load_jobs_file",
    "parse_duration_us",
    "parse_jobs_document",
    "spec_to_document",
    "validate_spec",
]

MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_JOBS = 100_000
MAX_NAME_CHARS = 128
MAX_OWNER_CHARS = 256
MAX_SHELL_BYTES = 8 * 1024
MAX_SCHEDULE_CHARS = 256  # also bounds the memo of compiled schedules
MAX_TIMEZONE_CHARS = 64
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_PAYLOAD_DEPTH = 32
MAX_TIMEOUT_US = 7 * DAY
MAX_BACKOFF_US = DAY
MAX_WITHIN_US = 365 * DAY
MAX_GRACE_US = 7 * DAY
MAX_JITTER_US = DAY

TARGET_KINDS = ("handler", "shell")
MISFIRE_POLICIES = ("fire_late", "skip", "catch_up")
DST_GAP_RULES = ("run_at_end", "skip")
DST_REPEAT_RULES = ("first", "second", "both")
OVERLAP_RULES = ("allow", "forbid", "queue", "replace")

_JOB_KEYS = (
    "id", "schedule", "timezone", "target", "owner", "class", "timeout", "retry",
    "priority", "payload", "misfire", "dst", "jitter", "overlap", "paused", "uses", "history",
)  # fmt: skip
# Run history retention (see scheduler/core/retention.py): YAML key -> HistoryPolicy field.
_HISTORY_KEYS = {
    "keep": "keep_runs", "keep_for": "max_age_us", "keep_failed": "keep_failed_runs",
    "keep_failed_for": "failed_max_age_us",
}  # fmt: skip
MAX_HISTORY_RUNS = 1_000_000
MAX_HISTORY_AGE_US = 3650 * DAY
_RESOURCE_KEYS = ("max_concurrent", "max_starts_per_s")
MAX_RESOURCE_LIMIT = 1_000_000
MAX_USES = 16
_REQUIRED_KEYS = ("id", "schedule", "target")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-")

_DEFAULT = JobSpec(id="", schedule="", target_kind="handler", target="")
_DEFAULT_RETRY = RetryPolicy()
_DEFAULT_HISTORY = HistoryPolicy()
_DEFAULT_MISFIRE = MisfirePolicy()


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


# ---------------------------------------------------------------------------------------------
# The rules: validate_spec
# ---------------------------------------------------------------------------------------------


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
    check("schedule", _string_problem(spec.schedule, allow_empty=False, max_chars=MAX_SCHEDULE_CHARS))
    check("timezone", _string_problem(spec.timezone, allow_empty=False, max_chars=MAX_TIMEZONE_CHARS))
    if spec.target_kind == "handler":
        check("target", _name_problem(spec.target, what="handler name "))
    elif spec.target_kind == "shell":
        check("target", _shell_problem(spec.target))
    else:
        check("target", f"kind must be one of {_choices(TARGET_KINDS, spec.target_kind)}")
    check("owner", _string_problem(spec.owner, max_chars=MAX_OWNER_CHARS))
    check("class", _name_problem(spec.job_class))
    check("timeout", _duration_problem(spec.timeout_us, 1, MAX_TIMEOUT_US))
    if isinstance(spec.retry, RetryPolicy):
        found.extend(_retry_problems(spec.retry))
    else:
        check("retry", f"must be a retry policy, not {type_name(spec.retry)}")
    check("priority", _int_problem(spec.priority, -1000, 1000))
    check("payload", _payload_json_problem(spec.payload_json))
    if isinstance(spec.misfire, MisfirePolicy):
        check("misfire.policy", _choice_problem(spec.misfire.policy, MISFIRE_POLICIES))
        check("misfire.grace", _duration_problem(spec.misfire.grace_us, 0, MAX_GRACE_US))
        check("misfire.max_catch_up", _int_problem(spec.misfire.max_catch_up, 0, 1000))
    else:
        check("misfire", f"must be a misfire policy, not {type_name(spec.misfire)}")
    check("dst.gap", _choice_problem(spec.dst_gap, ("", *DST_GAP_RULES)))
    check("dst.repeat", _choice_problem(spec.dst_repeat, ("", *DST_REPEAT_RULES)))
    check("jitter", _jitter_problem(spec.jitter))
    check("overlap", _choice_problem(spec.overlap, OVERLAP_RULES))
    if not isinstance(spec.paused, bool):
        check("paused", f"must be true or false, not {type_name(spec.paused)}")
    check("uses", _uses_problem(spec.uses))
    found.extend(_history_problems(spec.history))
    # The schedule is compiled only from parts that passed their own checks.
    bad = {field for field, _ in found}
    if not bad & {"schedule", "timezone", "dst.gap", "dst.repeat"}:
        check(*_schedule_problem(spec.schedule, spec.timezone, spec.dst_gap, spec.dst_repeat))
    return found


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
    if not found[1][1] and not found[2][1] and retry.backoff_max_us < retry.backoff_initial_us:
        initial = format_duration_us(retry.backoff_initial_us)
        found[2] = ("retry.backoff.max", f"must not be less than the initial backoff ({initial})")
    return [(field, message) for field, message in found if message]


def _string_problem(value: object, *, allow_empty: bool = True, max_chars: int = 0) -> str | None:
    if not isinstance(value, str):
        hint = " (quote it)" if isinstance(value, (bool, int, float)) else ""
        hint += " (YAML reads unquoted yes/no/on/off as booleans)" if isinstance(value, bool) else ""
        return f"must be a string, not {type_name(value)}{hint}"
    if not value and not allow_empty:
        return "must not be empty"
    if max_chars and len(value) > max_chars:
        return f"is {len(value)} characters long; at most {max_chars} are allowed"
    for char in value:
        category = unicodedata.category(char)
        if category == "Cc":
            return f"contains the control character {char!r}"
        if category == "Cs":
            return f"contains a lone surrogate {char!r}"
    return None


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


def _suggestion(word: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word.lower(), [k for k in known if k], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _jitter_problem(value: object) -> str | None:
    expected = f"must be 'auto', 'pinned' or a window of at most {format_duration_us(MAX_JITTER_US)}"
    if not isinstance(value, str):
        return f"{expected}, not {type_name(value)}"
    if value in ("auto", "pinned"):
        return None
    try:
        window = parse_duration_us(value, "jitter")
    except DurationError:
        return f"{expected} ({EXAMPLES}); got {value!r}{_suggestion(value, ('auto', 'pinned'))}"
    if window == 0:
        return "a zero window is written 'pinned'"
    if window > MAX_JITTER_US:
        return f"{expected}, got {format_duration_us(window)}"
    return None


# ---------------------------------------------------------------------------------------------
# Payloads: any JSON value, stored as canonical JSON text
# ---------------------------------------------------------------------------------------------


class _PayloadProblem(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def canonical_payload_json(value: object) -> str:
    """The canonical JSON text stored for a payload value; raises ValueError if it may not be one."""
    try:
        return _canonical(value)
    except _PayloadProblem as problem:
        raise ValueError(f"{problem.field}: {problem.message}") from None


def _canonical(value: object) -> str:
    _check_json_value(value, "payload", 0, [0])
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    if len(text) > MAX_PAYLOAD_BYTES:  # ASCII only (json.dumps escapes the rest): chars = bytes
        raise _PayloadProblem("payload", f"is {len(text)} bytes as JSON; at most 64 KiB is allowed")
    return text


def _check_json_value(value: object, path: str, depth: int, seen: list[int]) -> None:
    # Every value costs at least one byte of JSON, so counting them bounds the work even for
    # YAML alias trees whose expanded size is exponential.
    seen[0] += 1
    if seen[0] > MAX_PAYLOAD_BYTES:
        raise _PayloadProblem("payload", "is larger than 64 KiB as JSON")
    if value is None or isinstance(value, (bool, int, str)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _PayloadProblem(path, f"must be a finite number, got {value}")
        return
    if not isinstance(value, (dict, list)):
        hint = " (quote it to keep it as text)" if isinstance(value, datetime.date) else ""
        raise _PayloadProblem(path, f"{type_name(value)} is not a JSON value{hint}")
    if depth + 1 > MAX_PAYLOAD_DEPTH:
        raise _PayloadProblem(path, f"nests deeper than {MAX_PAYLOAD_DEPTH} levels")
    if isinstance(value, list):
        for position, item in enumerate(value):
            _check_json_value(item, f"{path}[{position}]", depth + 1, seen)
        return
    for key, item in value.items():
        if not isinstance(key, str):
            raise _PayloadProblem(path, f"key {key!r} is not a string (quote it)")
        _check_json_value(item, f"{path}.{_short(key, 40)}", depth + 1, seen)


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not allowed")


def _payload_json_problem(text: object) -> str | None:
    if not isinstance(text, str):
        return f"must be JSON text, not {type_name(text)}"
    if not text:
        return None
    if len(text) > MAX_PAYLOAD_BYTES:
        return f"is {len(text)} characters long; at most 64 KiB is allowed"
    try:
        value = json.loads(text, parse_constant=_reject_constant)
        canonical = _canonical(value)
    except _PayloadProblem as problem:
        inside = "" if problem.field == "payload" else f"{problem.field}: "
        return inside + problem.message
    except RecursionError:
        return f"nests deeper than {MAX_PAYLOAD_DEPTH} levels"
    except ValueError as error:
        return f"is not valid JSON: {error}"
    if canonical != text:
        return (
            "must be canonical JSON: sorted keys, no spaces, non-ASCII escaped"
            " (json.dumps with sort_keys=True, separators=(',', ':'))"
        )
    return None


# ---------------------------------------------------------------------------------------------
# Documents -> specs
# ---------------------------------------------------------------------------------------------


def load_jobs_file(path: str | os.PathLike[str]) -> list[JobSpec]:
    """Read and validate a job file; raises SpecError (or OSError when it cannot be read)."""
    return load_job_document(path).jobs


@dataclass(frozen=True)
class JobDocument:
    """A job file: its jobs, and the cluster-wide resources it declares (may be empty)."""

    jobs: list[JobSpec]
    resources: list[Resource]


def load_job_document(path: str | os.PathLike[str]) -> JobDocument:
    """Read and validate a job file, with its `resources:` declarations; SpecError or OSError."""
    source = os.fspath(path)
    with open(path, "rb") as file:
        data = file.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise _file_error(source, f"{source} is larger than 8 MiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise _file_error(source, f"{source} is not UTF-8 (byte {error.start})") from None
    return parse_job_document(text, source)


def parse_jobs_document(text: str, source: str = "<input>") -> list[JobSpec]:
    """Validated specs for every job in a YAML document, or SpecError listing every problem."""
    return parse_job_document(text, source).jobs


def parse_job_document(text: str, source: str = "<input>") -> JobDocument:
    """Validated jobs and resources of a YAML document, or SpecError listing every problem."""
    if len(text) > MAX_FILE_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise _file_error(source, f"{source} is larger than 8 MiB")
    try:
        document, duplicates = _load_yaml(text, source)
    except yaml.MarkedYAMLError as error:
        raise _file_error(source, _yaml_message(error, source)) from None
    except yaml.YAMLError as error:
        raise _file_error(source, f"{source}: invalid YAML: {error}") from None
    except RecursionError:
        raise _file_error(source, f"{source}: the YAML nests too deeply") from None
    except ValueError as error:  # a constructor refused a scalar, e.g. a date like 2024-02-30
        raise _file_error(source, f"{source}: invalid YAML value: {error}") from None
    entries = _job_entries(document, source)
    resources, problems = _read_resources(document.get("resources") if isinstance(document, dict) else None)
    problems[:0] = [_file_problem(message) for message in duplicates]
    specs: list[JobSpec] = []
    first_seen: dict[str, int] = {}
    for position, entry in enumerate(entries, start=1):
        label, spec, found = _read_job(entry, position)
        problems.extend(SpecProblem(label, field, message) for field, message in found)
        if spec is not None and isinstance(spec.id, str) and spec.id:
            if spec.id in first_seen:
                first = first_seen[spec.id]
                message = f"is used by job #{first} and job #{position}; ids must be unique"
                problems.append(SpecProblem(label, "id", message))
            else:
                first_seen[spec.id] = position
            specs.append(spec)
    if problems:
        raise SpecError(problems, source)
    return JobDocument(specs, resources)


def _read_resources(value: object) -> tuple[list[Resource], list[SpecProblem]]:
    """`resources: {db-main: {max_concurrent: 20, max_starts_per_s: 50}}`."""
    if value is None:
        return [], []
    if not isinstance(value, dict):
        return [], [SpecProblem("", "resources", f"must be a mapping of names to limits, not {type_name(value)}")]
    resources, problems = [], []
    for name, limits in value.items():
        limits = {} if limits is None else limits
        if not isinstance(limits, dict):
            problems.append(SpecProblem("", f"resources.{name}", f"must be a mapping, not {type_name(limits)}"))
            continue
        unknown = [key for key in limits if key not in _RESOURCE_KEYS]
        problems += [SpecProblem("", f"resources.{name}", _unknown_key(key, _RESOURCE_KEYS)) for key in unknown]
        resource = Resource(name, limits.get("max_concurrent", 0), limits.get("max_starts_per_s", 0))  # type: ignore[arg-type]
        problems += validate_resource(resource)
        resources.append(resource)
    return resources, problems


def _load_yaml(text: str, source: str) -> tuple[object, list[str]]:
    """`yaml.safe_load`, plus the keys repeated within one mapping (which it silently drops).

    This is exactly what safe_load does (SafeLoader: plain data only, never Python objects),
    split in two so that the node tree can be checked before it is turned into data.
    """
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, []
        duplicates = _duplicate_keys(node, source)  # before construction rewrites merge keys
        return loader.construct_document(node), duplicates
    finally:
        loader.dispose()


def _duplicate_keys(root: yaml.Node, source: str) -> list[str]:
    repeats: list[tuple[int, int, str, int]] = []
    stack, visited = [root], set()
    while stack:
        node = stack.pop()
        if id(node) in visited:  # aliases share nodes, and may even form loops
            continue
        visited.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            first_lines: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                stack.extend((key, value))
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    line, column = key.start_mark.line + 1, key.start_mark.column + 1
                    if (key.tag, key.value) in first_lines:
                        repeats.append((line, column, key.value, first_lines[(key.tag, key.value)]))
                    else:
                        first_lines[(key.tag, key.value)] = line
    return [
        f"{source}:{line}:{column}: key {name!r} repeats the one on line {first} of the same mapping"
        for line, column, name, first in sorted(repeats)
    ]


def _file_problem(message: str) -> SpecProblem:
    return SpecProblem("", "", message)


def _file_error(source: str, message: str, field: str = "") -> SpecError:
    return SpecError([SpecProblem("", field, message)], source)


def _yaml_message(error: yaml.MarkedYAMLError, source: str) -> str:
    mark = error.problem_mark or error.context_mark
    where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
    what = " ".join(part for part in (error.context, error.problem) if part) or "invalid YAML"
    if "alias" in what:
        what += " (a value starting with '*', such as a cron expression, must be quoted)"
    return f"{where}: YAML syntax error: {what}"


def _job_entries(document: object, source: str) -> list[object]:
    if isinstance(document, dict):
        for key in document:
            if key not in ("jobs", "resources"):
                field = key if isinstance(key, str) else ""
                raise _file_error(source, _unknown_key(key, ("jobs", "resources")), field)
        if "jobs" not in document:
            raise _file_error(source, "is required (a list of jobs)", "jobs")
        document = document["jobs"]
        if not isinstance(document, list):
            raise _file_error(source, f"must be a list, not {type_name(document)}", "jobs")
    elif document is None:
        raise _file_error(source, f"{source} is empty; expected a mapping with a 'jobs' list")
    elif not isinstance(document, list):
        message = f"{source}: expected a mapping with a 'jobs' list, not {type_name(document)}"
        raise _file_error(source, message)
    if len(document) > MAX_JOBS:
        message = f"{source} declares {len(document)} jobs; at most {MAX_JOBS} are allowed per file"
        raise _file_error(source, message)
    return document


class _Reader:
    """Turns one job mapping into JobSpec arguments, noting what it could not turn."""

    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []
        self.failed: set[str] = set()

    def fail(self, field: str, message: str | None) -> None:
        if message:
            self.problems.append((field, message))
        self.failed.add(field)

    def mapping(self, value: object, field: str, keys: tuple[str, ...]) -> dict[str, object]:
        if not isinstance(value, dict):
            self.fail(field, f"must be a mapping, not {type_name(value)}")
            return {}
        known = {}
        for key, item in value.items():
            if key in keys:
                known[key] = item
            elif isinstance(key, str):
                self.fail(f"{field}.{key}" if field else key, _unknown_key(key, keys))
            else:
                self.problems.append((field, _unknown_key(key, keys)))
        return known

    def duration(self, value: object, field: str, default: int) -> int:
        try:
            return parse_duration_us(value, field)
        except DurationError as error:
            self.fail(field, error.message)
            return default

    def suppressed(self, field: str) -> bool:
        """Whether `field` (or a part or parent of it) already failed to be read."""
        return any(
            field == f or field.startswith(f + ".") or f.startswith(field + ".") for f in self.failed
        )


def _unknown_key(key: object, known: tuple[str, ...]) -> str:
    if not isinstance(key, str):
        hint = " (YAML reads unquoted yes/no/on/off as booleans)" if isinstance(key, bool) else ""
        return f"key {key!r} is not a string{hint}"
    suggestion = _suggestion(key, known)
    return f"unknown key{suggestion}" if suggestion else f"unknown key; known keys: {', '.join(known)}"


def _read_job(entry: object, position: int) -> tuple[str, JobSpec | None, list[tuple[str, str]]]:
    if not isinstance(entry, dict):
        return f"#{position}", None, [("", f"must be a mapping of job fields, not {type_name(entry)}")]
    job_id = entry.get("id")
    label = _short(job_id) if isinstance(job_id, str) and job_id else f"#{position}"
    reader = _Reader()
    fields = reader.mapping(entry, "", _JOB_KEYS)
    for key in _REQUIRED_KEYS:
        if key not in fields:
            reader.fail(key, "is required")
    args: dict[str, object] = {
        "id": fields.get("id", ""),
        "schedule": fields.get("schedule", ""),
        "job_class": fields.get("class", _DEFAULT.job_class),
    }
    args.update(_read_target(reader, fields.get("target")) if "target" in fields else {})
    for key in ("timezone", "owner", "priority", "overlap", "paused"):
        if key in fields:
            args[key] = fields[key]
    if "timeout" in fields:
        args["timeout_us"] = reader.duration(fields["timeout"], "timeout", _DEFAULT.timeout_us)
    if "retry" in fields:
        args["retry"] = _read_retry(reader, fields["retry"])
    if "payload" in fields:
        try:
            args["payload_json"] = _canonical(fields["payload"])
        except _PayloadProblem as problem:
            reader.fail(problem.field, problem.message)
    if "misfire" in fields:
        args["misfire"] = _read_misfire(reader, fields["misfire"])
    if "dst" in fields:
        dst = reader.mapping(fields["dst"], "dst", ("gap", "repeat"))
        args.update(dst_gap=dst.get("gap", ""), dst_repeat=dst.get("repeat", ""))
    if "jitter" in fields:
        args["jitter"] = _read_jitter(fields["jitter"])
    if "uses" in fields:
        uses = fields["uses"]
        args["uses"] = tuple(uses) if isinstance(uses, list) else uses
    if "history" in fields:
        args["history"] = _read_history(reader, fields["history"])
    args.setdefault("target_kind", "handler")
    args.setdefault("target", "")
    spec = JobSpec(**args)  # type: ignore[arg-type]  # values are checked by validate_spec
    found = reader.problems + [p for p in _spec_problems(spec) if not reader.suppressed(p[0])]
    found.sort(key=lambda problem: _field_rank(problem[0]))
    return label, spec, found


def _read_target(reader: _Reader, target: object) -> dict[str, object]:
    if isinstance(target, str):
        return {"target_kind": "handler", "target": target}
    if isinstance(target, dict):
        known = reader.mapping(target, "target", TARGET_KINDS)
        if len(known) == 1:
            kind, name = next(iter(known.items()))
            return {"target_kind": kind, "target": name}
        if len(known) > 1:
            reader.fail("target", "must name either a handler or a shell command, not both")
        else:
            reader.fail("target", None if target else "must be {handler: NAME} or {shell: COMMAND}")
        return {}
    forms = "a handler name, {handler: NAME} or {shell: COMMAND}"
    reader.fail("target", f"must be {forms}, not {type_name(target)}")
    return {}


def _read_history(reader: _Reader, value: object) -> HistoryPolicy:
    """`history: {keep: 1000, keep_for: 30d, keep_failed: 1000, keep_failed_for: 90d}`; 0s: no age limit."""
    history = reader.mapping(value, "history", tuple(_HISTORY_KEYS))
    args: dict[str, object] = {}
    for key, item in history.items():
        name = _HISTORY_KEYS[key]
        if name.endswith("_us"):
            args[name] = reader.duration(item, f"history.{key}", getattr(_DEFAULT_HISTORY, name))
        else:
            args[name] = item
    return HistoryPolicy(**args)  # type: ignore[arg-type]  # counts are checked by validate_spec


def _read_retry(reader: _Reader, value: object) -> RetryPolicy:
    retry = reader.mapping(value, "retry", ("max_attempts", "backoff", "within"))
    args: dict[str, object] = {}
    if "max_attempts" in retry:
        args["max_attempts"] = retry["max_attempts"]
    if "backoff" in retry:
        backoff = retry["backoff"]
        initial_default = _DEFAULT_RETRY.backoff_initial_us
        if isinstance(backoff, dict):
            parts = reader.mapping(backoff, "retry.backoff", ("initial", "max", "multiplier"))
        else:
            parts = {"initial": backoff}
        if "initial" in parts:
            field = "retry.backoff.initial" if isinstance(backoff, dict) else "retry.backoff"
            args["backoff_initial_us"] = reader.duration(parts["initial"], field, initial_default)
        if "max" in parts:
            args["backoff_max_us"] = reader.duration(parts["max"], "retry.backoff.max", 0)
        else:
            initial = args.get("backoff_initial_us", initial_default)
            args["backoff_max_us"] = _default_backoff_max(initial)
        if "multiplier" in parts:
            multiplier = parts["multiplier"]  # `multiplier: 2` is stored as the float 2.0
            is_small_int = type(multiplier) is int and abs(multiplier) <= 2**53
            args["backoff_multiplier"] = float(multiplier) if is_small_int else multiplier
    if "within" in retry:
        args["within_us"] = reader.duration(retry["within"], "retry.within", 0)
    return RetryPolicy(**args)  # type: ignore[arg-type]


def _default_backoff_max(initial_us: object) -> int:
    """An unset maximum backoff is 5m, or the initial backoff if that is longer (up to 1d)."""
    default = _DEFAULT_RETRY.backoff_max_us
    return min(max(default, initial_us), MAX_BACKOFF_US) if isinstance(initial_us, int) else default


def _read_misfire(reader: _Reader, value: object) -> MisfirePolicy:
    misfire = reader.mapping(value, "misfire", ("policy", "grace", "max_catch_up"))
    args: dict[str, object] = {}
    if "policy" in misfire:
        args["policy"] = misfire["policy"]
    if "grace" in misfire:
        args["grace_us"] = reader.duration(misfire["grace"], "misfire.grace", _DEFAULT_MISFIRE.grace_us)
    if "max_catch_up" in misfire:
        args["max_catch_up"] = misfire["max_catch_up"]
    return MisfirePolicy(**args)  # type: ignore[arg-type]


def _read_jitter(value: object) -> object:
    """"auto"/"pinned" stay; a zero window is "pinned"; other windows get their canonical form."""
    if isinstance(value, str) and value in ("auto", "pinned"):
        return value
    try:
        window = parse_duration_us(value, "jitter")
    except DurationError:
        return value  # validate_spec says what is wrong with it
    return "pinned" if window == 0 else format_duration_us(window)


def _field_rank(field: str) -> int:
    head = field.split(".", 1)[0]
    return _JOB_KEYS.index(head) if head in _JOB_KEYS else -1


def _short(text: str, limit: int = 64) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------------------------------------
# Specs -> documents
# ---------------------------------------------------------------------------------------------


def spec_to_document(spec: JobSpec, full: bool = False) -> dict[str, object]:
    """The job mapping that parses back to `spec`: non-default fields only, or all with `full`."""
    document: dict[str, object] = {"id": spec.id, "schedule": spec.schedule}

    def put(key: str, value: object, default: object) -> None:
        if full or value != default:
            document[key] = value

    put("timezone", spec.timezone, _DEFAULT.timezone)
    if spec.target_kind == "handler":
        document["target"] = spec.target
    else:
        document["target"] = {spec.target_kind: spec.target}
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
    dst = {"gap": spec.dst_gap, "repeat": spec.dst_repeat}
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
    return document


def _misfire_document(misfire: MisfirePolicy, full: bool) -> dict[str, object]:
    document: dict[str, object] = {}
    if full or misfire.policy != _DEFAULT_MISFIRE.policy:
        document["policy"] = misfire.policy
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
    return document
