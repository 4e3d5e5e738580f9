import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from worker.api.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListRunsRequest(_message.Message):
    __slots__ = ("job_id", "owner", "job_class", "statuses", "since", "until", "page_size", "page_token", "linearizable", "newest_first")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    JOB_CLASS_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LINEARIZABLE_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIRST_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    owner: str
    job_class: str
    statuses: _containers.RepeatedScalarFieldContainer[_common_pb2.RunStatus]
    since: _timestamp_pb2.Timestamp
    until: _timestamp_pb2.Timestamp
    page_size: int
    page_token: str
    linearizable: bool
    newest_first: bool
    def __init__(self, job_id: _Optional[str] = ..., owner: _Optional[str] = ..., job_class: _Optional[str] = ..., statuses: _Optional[_Iterable[_Union[_common_pb2.RunStatus, str]]] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., linearizable: _Optional[bool] = ..., newest_first: _Optional[bool] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs", "next_page_token", "read")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[_common_pb2.Run]
    next_page_token: str
    read: _common_pb2.ReadInfo
    def __init__(self, runs: _Optional[_Iterable[_Union[_common_pb2.Run, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., read: _Optional[_Union[_common_pb2.ReadInfo, _Mapping]] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("job_id", "scheduled_at", "run_key", "linearizable")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    RUN_KEY_FIELD_NUMBER: _ClassVar[int]
    LINEARIZABLE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    scheduled_at: _timestamp_pb2.Timestamp
    run_key: str
    linearizable: bool
    def __init__(self, job_id: _Optional[str] = ..., scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., run_key: _Optional[str] = ..., linearizable: _Optional[bool] = ...) -> None: ...

class GetRunResponse(_message.Message):
    __slots__ = ("run", "read")
    RUN_FIELD_NUMBER: _ClassVar[int]
    READ_FIELD_NUMBER: _ClassVar[int]
    run: _common_pb2.Run
    read: _common_pb2.ReadInfo
    def __init__(self, run: _Optional[_Union[_common_pb2.Run, _Mapping]] = ..., read: _Optional[_Union[_common_pb2.ReadInfo, _Mapping]] = ...) -> None: ...
