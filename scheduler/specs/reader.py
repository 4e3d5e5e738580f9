"""Job documents (YAML) -> specs: every problem in a document is collected, and nothing is
returned if there is any.

The reader only turns YAML shapes into a JobSpec (durations to microseconds, `target` to kind +
name, `payload` to canonical JSON, `class` to `job_class`) and reports what it cannot turn; what
the values may be is left to `validate_spec` (rules.py), whose problems it adds.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from datetime import date, datetime

import yaml

from scheduler.core.model import (
    ActiveWindow,
    AlertRoute,
    Calendar,
    HistoryPolicy,
    JobSpec,
    MisfirePolicy,
    Resource,
    RetryPolicy,
)
from scheduler.core.vocabulary import TargetKind
from scheduler.planning.durations import DurationError, format_duration_us, parse_duration_us, type_name
from scheduler.planning.timeconv import to_us
from scheduler.specs.calendars import read_calendar_rule, read_calendars
from scheduler.specs.http_target import read_http_target
from scheduler.specs.payload import _canonical, _PayloadProblem
from scheduler.specs.problems import SpecError, SpecProblem, _short, _suggestion
from scheduler.specs.routes import read_routes
from scheduler.specs.rules import (
    _DEFAULT,
    _DEFAULT_HISTORY,
    _DEFAULT_MISFIRE,
    _DEFAULT_RETRY,
    _HISTORY_KEYS,
    TARGET_KINDS,
    _default_backoff_max,
    _name_problem,
    _spec_problems,
    validate_resource,
)

MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_JOBS = 100_000

_JOB_KEYS = (
    "id", "schedule", "schedules", "every", "anchor", "at", "timezone", "active", "max_runs", "target", "owner",
    "class", "timeout", "retry", "priority", "payload", "misfire", "dst", "jitter", "overlap", "paused", "uses",
    "history", "calendar", "pause_after_failures", "after", "deadline",
)  # fmt: skip
_RESOURCE_KEYS = ("max_concurrent", "max_starts_per_s")
# `schedule` is not required: a job with none of schedule, schedules, every and at is manual-only.
_REQUIRED_KEYS = ("id", "target")
_INSTANT_EXAMPLE = "an ISO-8601 instant with a UTC offset, e.g. 2027-03-01T09:00:00Z"
_TOP_KEYS = ("jobs", "resources", "calendars", "routes")


def load_jobs_file(path: str | os.PathLike[str]) -> list[JobSpec]:
    """Read and validate a job file; raises SpecError (or OSError when it cannot be read)."""
    return load_job_document(path).jobs


@dataclass(frozen=True)
class JobDocument:
    """A job file: its jobs, and the cluster-wide resources it declares (may be empty)."""

    jobs: list[JobSpec]
    resources: list[Resource]
    # `calendars:`: explicit dates, or holiday requests the proposing node expands.
    calendars: list[Calendar] = dataclasses.field(default_factory=list)
    # `routes:`: where alerts go (admin only); empty when the file declares none.
    routes: list[AlertRoute] = dataclasses.field(default_factory=list)
    # Whether the file has a `routes:` section: only then may a pruning apply drop routes.
    declares_routes: bool = False


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
    calendars, calendar_problems = read_calendars(
        document.get("calendars") if isinstance(document, dict) else None, _name_problem
    )
    problems += calendar_problems
    routes, route_problems = read_routes(document.get("routes") if isinstance(document, dict) else None, _name_problem)
    problems += route_problems
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
    return JobDocument(specs, resources, calendars, routes, isinstance(document, dict) and "routes" in document)


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
            if key not in _TOP_KEYS:
                where = key if isinstance(key, str) else ""
                raise _file_error(source, _unknown_key(key, _TOP_KEYS), where)
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
        return any(field == f or field.startswith(f + ".") or f.startswith(field + ".") for f in self.failed)


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
    args.update(_read_ways_to_fire(reader, fields))
    if "calendar" in fields:
        rule, rule_problems = read_calendar_rule(fields["calendar"])
        for where, message in rule_problems:
            reader.fail(where, message)
        if rule is not None:
            args["calendar"] = rule
    args.setdefault("target_kind", TargetKind.HANDLER)
    args.setdefault("target", "")
    spec = JobSpec(**args)  # type: ignore[arg-type]  # values are checked by validate_spec
    found = reader.problems + [p for p in _spec_problems(spec) if not reader.suppressed(p[0])]
    found.sort(key=lambda problem: _field_rank(problem[0]))
    return label, spec, found


def _read_ways_to_fire(reader: _Reader, fields: dict[str, object]) -> dict[str, object]:
    """`schedules:`, `every:` with `anchor:`, `at:`, `active: {from, until}` and `max_runs:`."""
    args: dict[str, object] = {}
    if fields.get("schedule") == "":
        reader.fail("schedule", "must not be empty (leave `schedule:` out for a manual-only job)")
    if "schedules" in fields:
        schedules = fields["schedules"]
        args["schedules"] = tuple(schedules) if isinstance(schedules, list) else schedules
    if "every" in fields:
        args["every_us"] = reader.duration(fields["every"], "every", 0)
    for key in ("anchor", "at"):
        if key in fields:
            instant = _read_instant(reader, fields[key], key)
            if instant is not None:
                args[f"{key}_us"] = instant
    if "active" in fields:
        window = reader.mapping(fields["active"], "active", ("from", "until"))
        bounds = [_read_instant(reader, window[k], f"active.{k}") if k in window else 0 for k in ("from", "until")]
        if fields["active"] is None or (isinstance(fields["active"], dict) and not window):
            reader.fail("active", "needs `from:`, `until:` or both")
        elif None not in bounds and not reader.suppressed("active"):
            args["active"] = ActiveWindow(*bounds)  # type: ignore[arg-type]
    if "max_runs" in fields:
        args["max_runs"] = fields["max_runs"]
    if "pause_after_failures" in fields:
        args["pause_after_failures"] = fields["pause_after_failures"]
    if "after" in fields:
        after = fields["after"]
        # One parent may be written as a bare name: `after: extract`.
        args["after"] = (after,) if isinstance(after, str) else tuple(after) if isinstance(after, list) else after
    if "deadline" in fields:
        deadline_us = reader.duration(fields["deadline"], "deadline", 0)
        if not reader.suppressed("deadline"):
            args["deadline_us"] = deadline_us
    return args


def _read_instant(reader: _Reader, value: object, field: str) -> int | None:
    """An instant from a YAML timestamp or a string; a time without a UTC offset is refused."""
    if isinstance(value, str):
        try:
            text = value.strip()
            value = date.fromisoformat(text) if len(text) == 10 else datetime.fromisoformat(text)
        except ValueError:
            reader.fail(field, f"must be {_INSTANT_EXAMPLE}; got {_short(repr(value), 60)}")
            return None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            reader.fail(field, f"needs a UTC offset (add Z for UTC): {value.isoformat()}")
            return None
        return to_us(value)
    if isinstance(value, date):
        reader.fail(field, f"must be {_INSTANT_EXAMPLE}, not a date alone ({value.isoformat()})")
        return None
    reader.fail(field, f"must be {_INSTANT_EXAMPLE}, not {type_name(value)}")
    return None


def _read_target(reader: _Reader, target: object) -> dict[str, object]:
    if isinstance(target, str):
        return {"target_kind": TargetKind.HANDLER, "target": target}
    if isinstance(target, dict):
        known = reader.mapping(target, "target", TARGET_KINDS)
        if len(known) == 1:
            kind, name = next(iter(known.items()))
            if kind == TargetKind.HTTP:
                return _read_http(reader, name)
            return {"target_kind": kind, "target": name}
        if len(known) > 1:
            reader.fail("target", "must name one of a handler, a shell command or an HTTP request, not several")
        else:
            reader.fail("target", None if target else "must be {handler: NAME}, {shell: COMMAND} or {http: {url: URL}}")
        return {}
    forms = "a handler name, {handler: NAME}, {shell: COMMAND} or {http: {url: URL, ...}}"
    reader.fail("target", f"must be {forms}, not {type_name(target)}")
    return {}


def _read_http(reader: _Reader, value: object) -> dict[str, object]:
    http = read_http_target(value, reader.fail)
    if http is None:
        return {}
    return {"target_kind": TargetKind.HTTP, "target": http.url, "http": http}


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
    retry = reader.mapping(value, "retry", ("max_attempts", "backoff", "within", "final_exit_codes"))
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
    if "final_exit_codes" in retry:
        codes = retry["final_exit_codes"]
        args["final_exit_codes"] = tuple(codes) if isinstance(codes, list) else codes
    return RetryPolicy(**args)  # type: ignore[arg-type]


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
    """ "auto"/"pinned" stay; a zero window is "pinned"; other windows get their canonical form."""
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
