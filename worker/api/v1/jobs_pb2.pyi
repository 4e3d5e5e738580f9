import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from worker.api.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListCalendarsRequest(_message.Message):
    __slots__ = ("linearizable",)
    LINEARIZABLE_FIELD_NUMBER: _ClassVar[int]
    linearizable: bool
    def __init__(self, linearizable: _Optional[bool] = ...) -> None: ...

class ListCalendarsResponse(_message.Message):
    __slots__ = ("calendars", "read")
    CALENDARS_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    calendars: _containers.RepeatedCompositeFieldContainer[_common_pb2.Calendar]
    read: _common_pb2.ReadInfo
    def __init__(self, calendars: _Optional[_Iterable[_Union[_common_pb2.Calendar, _Mapping]]] = ..., read: _Optional[_Union[_common_pb2.ReadInfo, _Mapping]] = ...) -> None: ...

class TriggerJobRequest(_message.Message):
    __slots__ = ("job_id", "author", "request_id", "payload_json", "overlap")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    author: str
    request_id: str
    payload_json: str
    overlap: str
    def __init__(self, job_id: _Optional[str] = ..., author: _Optional[str] = ..., request_id: _Optional[str] = ..., payload_json: _Optional[str] = ..., overlap: _Optional[str] = ...) -> None: ...

class TriggerJobResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("job_id", "scheduled_at", "reason", "author", "request_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    scheduled_at: _timestamp_pb2.Timestamp
    reason: str
    author: str
    request_id: str
    def __init__(self, job_id: _Optional[str] = ..., scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., author: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class CancelRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ...) -> None: ...

class BackfillJobRequest(_message.Message):
    __slots__ = ("job_id", "to", "max_runs", "rate_per_s", "author", "request_id", "payload_json", "overlap")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNS_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_S_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    to: _timestamp_pb2.Timestamp
    max_runs: int
    rate_per_s: float
    author: str
    request_id: str
    payload_json: str
    overlap: str
    def __init__(self, job_id: _Optional[str] = ..., to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., max_runs: _Optional[int] = ..., rate_per_s: _Optional[float] = ..., author: _Optional[str] = ..., request_id: _Optional[str] = ..., payload_json: _Optional[str] = ..., overlap: _Optional[str] = ..., **kwargs) -> None: ...

class BackfillJobResponse(_message.Message):
    __slots__ = ("runs", "already_ran")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    ALREADY_RAN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[_common_pb2.Run]
    already_ran: int
    def __init__(self, runs: _Optional[_Iterable[_Union[_common_pb2.Run, _Mapping]]] = ..., already_ran: _Optional[int] = ...) -> None: ...

class ApplyJobsRequest(_message.Message):
    __slots__ = ("jobs", "prune", "dry_run", "author", "request_id", "resources", "calendars", "routes", "declares_routes")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    PRUNE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    CALENDARS_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    DECLARES_ROUTES_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_common_pb2.JobSpec]
    prune: bool
    dry_run: bool
    author: str
    request_id: str
    resources: _containers.RepeatedCompositeFieldContainer[_common_pb2.Resource]
    calendars: _containers.RepeatedCompositeFieldContainer[_common_pb2.Calendar]
    routes: _containers.RepeatedCompositeFieldContainer[AlertRoute]
    declares_routes: bool
    def __init__(self, jobs: _Optional[_Iterable[_Union[_common_pb2.JobSpec, _Mapping]]] = ..., prune: _Optional[bool] = ..., dry_run: _Optional[bool] = ..., author: _Optional[str] = ..., request_id: _Optional[str] = ..., resources: _Optional[_Iterable[_Union[_common_pb2.Resource, _Mapping]]] = ..., calendars: _Optional[_Iterable[_Union[_common_pb2.Calendar, _Mapping]]] = ..., routes: _Optional[_Iterable[_Union[AlertRoute, _Mapping]]] = ..., declares_routes: _Optional[bool] = ...) -> None: ...

class ApplyJobsResponse(_message.Message):
    __slots__ = ("changes", "errors", "applied_index")
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    changes: _containers.RepeatedCompositeFieldContainer[_common_pb2.JobChange]
    errors: _containers.RepeatedCompositeFieldContainer[_common_pb2.ValidationError]
    applied_index: int
    def __init__(self, changes: _Optional[_Iterable[_Union[_common_pb2.JobChange, _Mapping]]] = ..., errors: _Optional[_Iterable[_Union[_common_pb2.ValidationError, _Mapping]]] = ..., applied_index: _Optional[int] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("job_id", "linearizable")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LINEARIZABLE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    linearizable: bool
    def __init__(self, job_id: _Optional[str] = ..., linearizable: _Optional[bool] = ...) -> None: ...

class GetJobResponse(_message.Message):
    __slots__ = ("job", "read")
    JOB_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.Job
    read: _common_pb2.ReadInfo
    def __init__(self, job: _Optional[_Union[_common_pb2.Job, _Mapping]] = ..., read: _Optional[_Union[_common_pb2.ReadInfo, _Mapping]] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("owner", "job_class", "page_size", "page_token", "linearizable")
    OWNER_FIELD_NUMBER: _ClassVar[int]
    JOB_CLASS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LINEARIZABLE_FIELD_NUMBER: _ClassVar[int]
    owner: str
    job_class: str
    page_size: int
    page_token: str
    linearizable: bool
    def __init__(self, owner: _Optional[str] = ..., job_class: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., linearizable: _Optional[bool] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token", "read")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_common_pb2.Job]
    next_page_token: str
    read: _common_pb2.ReadInfo
    def __init__(self, jobs: _Optional[_Iterable[_Union[_common_pb2.Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., read: _Optional[_Union[_common_pb2.ReadInfo, _Mapping]] = ...) -> None: ...

class DeleteJobRequest(_message.Message):
    __slots__ = ("job_id", "author", "request_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    author: str
    request_id: str
    def __init__(self, job_id: _Optional[str] = ..., author: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class DeleteJobResponse(_message.Message):
    __slots__ = ("applied_index",)
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    def __init__(self, applied_index: _Optional[int] = ...) -> None: ...

class PauseJobRequest(_message.Message):
    __slots__ = ("job_id", "author", "reason", "request_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    author: str
    reason: str
    request_id: str
    def __init__(self, job_id: _Optional[str] = ..., author: _Optional[str] = ..., reason: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class PauseJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.Job
    def __init__(self, job: _Optional[_Union[_common_pb2.Job, _Mapping]] = ...) -> None: ...

class ResumeJobRequest(_message.Message):
    __slots__ = ("job_id", "author", "reason", "request_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    author: str
    reason: str
    request_id: str
    def __init__(self, job_id: _Optional[str] = ..., author: _Optional[str] = ..., reason: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ResumeJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _common_pb2.Job
    def __init__(self, job: _Optional[_Union[_common_pb2.Job, _Mapping]] = ...) -> None: ...

class AlertRoute(_message.Message):
    __slots__ = ("name", "match", "url", "template", "timeout", "backoff")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MATCH_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_FIELD_NUMBER: _ClassVar[int]
    name: str
    match: str
    url: str
    template: str
    timeout: _duration_pb2.Duration
    backoff: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., match: _Optional[str] = ..., url: _Optional[str] = ..., template: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., backoff: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ListRoutesRequest(_message.Message):
    __slots__ = ("linearizable",)
    LINEARIZABLE_FIELD_NUMBER: _ClassVar[int]
    linearizable: bool
    def __init__(self, linearizable: _Optional[bool] = ...) -> None: ...

class ListRoutesResponse(_message.Message):
    __slots__ = ("routes", "redacted", "read")
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    REDACTED_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    routes: _containers.RepeatedCompositeFieldContainer[AlertRoute]
    redacted: bool
    read: _common_pb2.ReadInfo
    def __init__(self, routes: _Optional[_Iterable[_Union[AlertRoute, _Mapping]]] = ..., redacted: _Optional[bool] = ..., read: _Optional[_Union[_common_pb2.ReadInfo, _Mapping]] = ...) -> None: ...
