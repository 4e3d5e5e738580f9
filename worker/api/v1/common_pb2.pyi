import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OverlapPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OVERLAP_UNSPECIFIED: _ClassVar[OverlapPolicy]
    ALLOW: _ClassVar[OverlapPolicy]
    FORBID: _ClassVar[OverlapPolicy]
    QUEUE: _ClassVar[OverlapPolicy]
    REPLACE: _ClassVar[OverlapPolicy]

class RunStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATUS_UNSPECIFIED: _ClassVar[RunStatus]
    QUEUED: _ClassVar[RunStatus]
    LEASED: _ClassVar[RunStatus]
    SUCCEEDED: _ClassVar[RunStatus]
    FAILED: _ClassVar[RunStatus]
    TIMED_OUT: _ClassVar[RunStatus]
    SKIPPED: _ClassVar[RunStatus]
    MISSED: _ClassVar[RunStatus]
    CANCELLED: _ClassVar[RunStatus]
OVERLAP_UNSPECIFIED: OverlapPolicy
ALLOW: OverlapPolicy
FORBID: OverlapPolicy
QUEUE: OverlapPolicy
REPLACE: OverlapPolicy
RUN_STATUS_UNSPECIFIED: RunStatus
QUEUED: RunStatus
LEASED: RunStatus
SUCCEEDED: RunStatus
FAILED: RunStatus
TIMED_OUT: RunStatus
SKIPPED: RunStatus
MISSED: RunStatus
CANCELLED: RunStatus

class Target(_message.Message):
    __slots__ = ("handler", "shell", "http")
    HANDLER_FIELD_NUMBER: _ClassVar[int]
    SHELL_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    handler: str
    shell: str
    http: HttpTarget
    def __init__(self, handler: _Optional[str] = ..., shell: _Optional[str] = ..., http: _Optional[_Union[HttpTarget, _Mapping]] = ...) -> None: ...

class HttpTarget(_message.Message):
    __slots__ = ("url", "method", "headers", "body", "timeout", "success_codes", "follow_redirects")
    URL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_CODES_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_REDIRECTS_FIELD_NUMBER: _ClassVar[int]
    url: str
    method: str
    headers: _containers.RepeatedCompositeFieldContainer[HttpHeader]
    body: str
    timeout: _duration_pb2.Duration
    success_codes: _containers.RepeatedScalarFieldContainer[int]
    follow_redirects: bool
    def __init__(self, url: _Optional[str] = ..., method: _Optional[str] = ..., headers: _Optional[_Iterable[_Union[HttpHeader, _Mapping]]] = ..., body: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., success_codes: _Optional[_Iterable[int]] = ..., follow_redirects: _Optional[bool] = ...) -> None: ...

class HttpHeader(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("max_attempts", "backoff_initial", "backoff_max", "backoff_multiplier", "within", "final_exit_codes")
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_INITIAL_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_MAX_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    WITHIN_FIELD_NUMBER: _ClassVar[int]
    FINAL_EXIT_CODES_FIELD_NUMBER: _ClassVar[int]
    max_attempts: int
    backoff_initial: _duration_pb2.Duration
    backoff_max: _duration_pb2.Duration
    backoff_multiplier: float
    within: _duration_pb2.Duration
    final_exit_codes: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, max_attempts: _Optional[int] = ..., backoff_initial: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., backoff_max: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., backoff_multiplier: _Optional[float] = ..., within: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., final_exit_codes: _Optional[_Iterable[int]] = ...) -> None: ...

class MisfirePolicy(_message.Message):
    __slots__ = ("policy", "grace", "max_catch_up")
    POLICY_FIELD_NUMBER: _ClassVar[int]
    GRACE_FIELD_NUMBER: _ClassVar[int]
    MAX_CATCH_UP_FIELD_NUMBER: _ClassVar[int]
    policy: str
    grace: _duration_pb2.Duration
    max_catch_up: int
    def __init__(self, policy: _Optional[str] = ..., grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_catch_up: _Optional[int] = ...) -> None: ...

class DstPolicy(_message.Message):
    __slots__ = ("gap", "repeat")
    GAP_FIELD_NUMBER: _ClassVar[int]
    REPEAT_FIELD_NUMBER: _ClassVar[int]
    gap: str
    repeat: str
    def __init__(self, gap: _Optional[str] = ..., repeat: _Optional[str] = ...) -> None: ...

class JobSpec(_message.Message):
    __slots__ = ("id", "owner", "job_class", "schedule", "timezone", "misfire", "dst", "jitter", "paused", "target", "payload_json", "timeout", "retry", "priority", "overlap", "uses", "history", "schedules", "every", "anchor", "at", "active_from", "active_until", "max_runs", "pause_after_failures", "deadline", "calendar", "after")
    ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    JOB_CLASS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    USES_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    EVERY_FIELD_NUMBER: _ClassVar[int]
    ANCHOR_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FROM_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_UNTIL_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNS_FIELD_NUMBER: _ClassVar[int]
    PAUSE_AFTER_FAILURES_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    id: str
    owner: str
    job_class: str
    schedule: str
    timezone: str
    misfire: MisfirePolicy
    dst: DstPolicy
    jitter: str
    paused: bool
    target: Target
    payload_json: str
    timeout: _duration_pb2.Duration
    retry: RetryPolicy
    priority: int
    overlap: OverlapPolicy
    uses: _containers.RepeatedScalarFieldContainer[str]
    history: HistoryPolicy
    schedules: _containers.RepeatedScalarFieldContainer[str]
    every: _duration_pb2.Duration
    anchor: _timestamp_pb2.Timestamp
    at: _timestamp_pb2.Timestamp
    active_from: _timestamp_pb2.Timestamp
    active_until: _timestamp_pb2.Timestamp
    max_runs: int
    pause_after_failures: int
    deadline: _duration_pb2.Duration
    calendar: CalendarRule
    after: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., owner: _Optional[str] = ..., job_class: _Optional[str] = ..., schedule: _Optional[str] = ..., timezone: _Optional[str] = ..., misfire: _Optional[_Union[MisfirePolicy, _Mapping]] = ..., dst: _Optional[_Union[DstPolicy, _Mapping]] = ..., jitter: _Optional[str] = ..., paused: _Optional[bool] = ..., target: _Optional[_Union[Target, _Mapping]] = ..., payload_json: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., priority: _Optional[int] = ..., overlap: _Optional[_Union[OverlapPolicy, str]] = ..., uses: _Optional[_Iterable[str]] = ..., history: _Optional[_Union[HistoryPolicy, _Mapping]] = ..., schedules: _Optional[_Iterable[str]] = ..., every: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., anchor: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., active_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., active_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., max_runs: _Optional[int] = ..., pause_after_failures: _Optional[int] = ..., deadline: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., calendar: _Optional[_Union[CalendarRule, _Mapping]] = ..., after: _Optional[_Iterable[str]] = ...) -> None: ...

class CalendarRule(_message.Message):
    __slots__ = ("skip", "only", "on_skip")
    SKIP_FIELD_NUMBER: _ClassVar[int]
    ONLY_FIELD_NUMBER: _ClassVar[int]
    ON_SKIP_FIELD_NUMBER: _ClassVar[int]
    skip: _containers.RepeatedScalarFieldContainer[str]
    only: _containers.RepeatedScalarFieldContainer[str]
    on_skip: str
    def __init__(self, skip: _Optional[_Iterable[str]] = ..., only: _Optional[_Iterable[str]] = ..., on_skip: _Optional[str] = ...) -> None: ...

class Calendar(_message.Message):
    __slots__ = ("name", "dates", "holidays")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATES_FIELD_NUMBER: _ClassVar[int]
    HOLIDAYS_FIELD_NUMBER: _ClassVar[int]
    name: str
    dates: _containers.RepeatedScalarFieldContainer[str]
    holidays: HolidaySource
    def __init__(self, name: _Optional[str] = ..., dates: _Optional[_Iterable[str]] = ..., holidays: _Optional[_Union[HolidaySource, _Mapping]] = ...) -> None: ...

class HolidaySource(_message.Message):
    __slots__ = ("country", "subdivision", "years", "first_year", "library_version")
    COUNTRY_FIELD_NUMBER: _ClassVar[int]
    SUBDIVISION_FIELD_NUMBER: _ClassVar[int]
    YEARS_FIELD_NUMBER: _ClassVar[int]
    FIRST_YEAR_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_VERSION_FIELD_NUMBER: _ClassVar[int]
    country: str
    subdivision: str
    years: int
    first_year: int
    library_version: str
    def __init__(self, country: _Optional[str] = ..., subdivision: _Optional[str] = ..., years: _Optional[int] = ..., first_year: _Optional[int] = ..., library_version: _Optional[str] = ...) -> None: ...

class HistoryPolicy(_message.Message):
    __slots__ = ("keep_runs", "max_age", "keep_failed_runs", "failed_max_age")
    KEEP_RUNS_FIELD_NUMBER: _ClassVar[int]
    MAX_AGE_FIELD_NUMBER: _ClassVar[int]
    KEEP_FAILED_RUNS_FIELD_NUMBER: _ClassVar[int]
    FAILED_MAX_AGE_FIELD_NUMBER: _ClassVar[int]
    keep_runs: int
    max_age: _duration_pb2.Duration
    keep_failed_runs: int
    failed_max_age: _duration_pb2.Duration
    def __init__(self, keep_runs: _Optional[int] = ..., max_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., keep_failed_runs: _Optional[int] = ..., failed_max_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Resource(_message.Message):
    __slots__ = ("name", "max_concurrent", "max_starts_per_s")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_FIELD_NUMBER: _ClassVar[int]
    MAX_STARTS_PER_S_FIELD_NUMBER: _ClassVar[int]
    name: str
    max_concurrent: int
    max_starts_per_s: int
    def __init__(self, name: _Optional[str] = ..., max_concurrent: _Optional[int] = ..., max_starts_per_s: _Optional[int] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("spec", "version", "author", "updated_at", "cursor", "next_due", "paused", "last_status", "last_scheduled_at", "counted_runs", "spread", "children")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    NEXT_DUE_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    LAST_STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    COUNTED_RUNS_FIELD_NUMBER: _ClassVar[int]
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    spec: JobSpec
    version: int
    author: str
    updated_at: _timestamp_pb2.Timestamp
    cursor: _timestamp_pb2.Timestamp
    next_due: _timestamp_pb2.Timestamp
    paused: bool
    last_status: RunStatus
    last_scheduled_at: _timestamp_pb2.Timestamp
    counted_runs: int
    spread: _duration_pb2.Duration
    children: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, spec: _Optional[_Union[JobSpec, _Mapping]] = ..., version: _Optional[int] = ..., author: _Optional[str] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cursor: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., next_due: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., paused: _Optional[bool] = ..., last_status: _Optional[_Union[RunStatus, str]] = ..., last_scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., counted_runs: _Optional[int] = ..., spread: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., children: _Optional[_Iterable[str]] = ...) -> None: ...

class Attempt(_message.Message):
    __slots__ = ("number", "worker_id", "fencing_token", "started_at", "finished_at", "outcome", "error", "exit_code", "stdout_tail", "stderr_tail", "exception_type", "http_status")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    STDERR_TAIL_FIELD_NUMBER: _ClassVar[int]
    EXCEPTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    HTTP_STATUS_FIELD_NUMBER: _ClassVar[int]
    number: int
    worker_id: str
    fencing_token: int
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    outcome: str
    error: str
    exit_code: int
    stdout_tail: str
    stderr_tail: str
    exception_type: str
    http_status: int
    def __init__(self, number: _Optional[int] = ..., worker_id: _Optional[str] = ..., fencing_token: _Optional[int] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., outcome: _Optional[str] = ..., error: _Optional[str] = ..., exit_code: _Optional[int] = ..., stdout_tail: _Optional[str] = ..., stderr_tail: _Optional[str] = ..., exception_type: _Optional[str] = ..., http_status: _Optional[int] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ("job_id", "scheduled_at", "run_key", "kind", "schedule_index", "status", "reason", "effective_at", "claimed_at", "claim_index", "attempt", "fencing_token", "worker_id", "started_at", "finished_at", "exit_code", "error", "attempts")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    RUN_KEY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_INDEX_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_AT_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_AT_FIELD_NUMBER: _ClassVar[int]
    CLAIM_INDEX_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    scheduled_at: _timestamp_pb2.Timestamp
    run_key: str
    kind: str
    schedule_index: int
    status: RunStatus
    reason: str
    effective_at: _timestamp_pb2.Timestamp
    claimed_at: _timestamp_pb2.Timestamp
    claim_index: int
    attempt: int
    fencing_token: int
    worker_id: str
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    exit_code: int
    error: str
    attempts: _containers.RepeatedCompositeFieldContainer[Attempt]
    def __init__(self, job_id: _Optional[str] = ..., scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., run_key: _Optional[str] = ..., kind: _Optional[str] = ..., schedule_index: _Optional[int] = ..., status: _Optional[_Union[RunStatus, str]] = ..., reason: _Optional[str] = ..., effective_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., claimed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., claim_index: _Optional[int] = ..., attempt: _Optional[int] = ..., fencing_token: _Optional[int] = ..., worker_id: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., exit_code: _Optional[int] = ..., error: _Optional[str] = ..., attempts: _Optional[_Iterable[_Union[Attempt, _Mapping]]] = ...) -> None: ...

class ReadInfo(_message.Message):
    __slots__ = ("node_id", "applied_index", "commit_index", "from_leader", "leader", "leader_contact_age")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    FROM_LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_CONTACT_AGE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    applied_index: int
    commit_index: int
    from_leader: bool
    leader: str
    leader_contact_age: _duration_pb2.Duration
    def __init__(self, node_id: _Optional[str] = ..., applied_index: _Optional[int] = ..., commit_index: _Optional[int] = ..., from_leader: _Optional[bool] = ..., leader: _Optional[str] = ..., leader_contact_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ValidationError(_message.Message):
    __slots__ = ("job_id", "field", "message")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    field: str
    message: str
    def __init__(self, job_id: _Optional[str] = ..., field: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class JobChange(_message.Message):
    __slots__ = ("job_id", "change", "version")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    change: str
    version: int
    def __init__(self, job_id: _Optional[str] = ..., change: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...
