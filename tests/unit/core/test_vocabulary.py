"""The vocabulary (scheduler/core/vocabulary.py): its values stay the strings replicas hold, every
rejection code has a gRPC status, the enums with a proto counterpart match it and convert both
ways, and the worker SDK's own enums say the same words."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import grpc
import pytest

import scheduler.core.vocabulary as vocabulary
import worker
from scheduler.core.codec import decode_command, encode_command
from scheduler.core.commands import ClaimRuns, SlotClaim
from scheduler.core.vocabulary import (
    AlertKind,
    AlertTemplate,
    CompletionKind,
    DstGap,
    DstRepeat,
    ExpiryReason,
    FenceReason,
    KillAction,
    LeaseOutcome,
    LeaseRefusal,
    Misfire,
    OnSkip,
    OutOfPlan,
    Overlap,
    RejectionCode,
    RunKind,
    RunStatus,
    SkipReason,
    TargetKind,
    Word,
)
from scheduler.rpc import convert
from scheduler.rpc.errors import REJECTION_CODES
from worker.api.v1 import common_pb2, worker_pb2

SCHEDULER = Path(__file__).resolve().parents[3] / "scheduler"

# Written out, not derived: these strings are in every log, snapshot and metrics history, so a
# renamed value is a format change, not a refactoring.
VALUES = {
    Overlap: ("allow", "forbid", "queue", "replace"),
    Misfire: ("fire_late", "skip", "catch_up"),
    OnSkip: ("skip", "previous_business_day", "next_business_day"),
    DstGap: ("run_at_end", "skip"),
    DstRepeat: ("first", "second", "both"),
    TargetKind: ("handler", "shell", "http"),
    RunStatus: ("queued", "leased", "succeeded", "failed", "timed_out", "skipped", "missed", "cancelled"),
    RunKind: ("scheduled", "manual", "backfill", "dependency"),
    CompletionKind: ("success", "failure", "retry_later"),
    ExpiryReason: ("lease_expired", "timed_out"),
    FenceReason: ("not_found", "stale_token", "cancelled", "not_leased", "bad_outcome"),
    LeaseOutcome: ("ok", "fenced", "not_found", "run_cancelled"),
    LeaseRefusal: (
        "not_queued",
        "backing_off",
        "job_deleted",
        "class_killed",
        "overlap_queue",
        "overlap_forbid",
        "resource_busy",
        "resource_rate",
    ),
    OutOfPlan: (
        "unknown_job",
        "stale_spec",
        "bad_status",
        "not_next_slot",
        "not_due_yet",
        "next_due_not_after_slot",
        "not_yet_due",
        "history_pruned",
    ),
    SkipReason: ("paused", "killed", "overlap forbid", "calendar", "parent"),
    AlertTemplate: ("json", "slack"),
    AlertKind: (
        "missed",
        "skipped",
        "failed",
        "timed_out",
        "late",
        "fenced",
        "killed",
        "recovered",
        "paused",
        "deadline_missed",
    ),
    KillAction: ("kill", "revive"),
    RejectionCode: (
        "invalid",
        "not_found",
        "version_conflict",
        "stale_plan",
        "stale_epoch",
        "stale_term",
        "overlap_forbid",
        "class_killed",
        "member_exists",
        "run_not_live",
        "stale_cluster_version",
        "unsupported_cluster_version",
        "index_not_increasing",
        "unknown_command",
        "internal_error",
        "bad_command",
    ),
}

# Each vocabulary with a proto enum: (enum, its descriptor, to proto, from proto).
PROTO_COUNTERPARTS = [
    (Overlap, common_pb2.OverlapPolicy.DESCRIPTOR, convert.OVERLAP_TO_PB, convert.OVERLAP_FROM_PB),
    (RunStatus, common_pb2.RunStatus.DESCRIPTOR, convert.STATUS_TO_PB, convert.STATUS_FROM_PB),
    (CompletionKind, worker_pb2.CompletionKind.DESCRIPTOR, convert.COMPLETION_TO_PB, convert.COMPLETION_FROM_PB),
    (LeaseOutcome, worker_pb2.LeaseOutcome.DESCRIPTOR, convert.LEASE_OUTCOME_TO_PB, convert.LEASE_OUTCOME_FROM_PB),
]

_PROTO_IDS = [kind.__name__ for kind, *_ in PROTO_COUNTERPARTS]


def _vocabularies() -> list[type[Word]]:
    return [
        value
        for _, value in inspect.getmembers(vocabulary, inspect.isclass)
        if issubclass(value, Word) and value is not Word
    ]


def test_every_vocabulary_keeps_the_strings_replicas_hold() -> None:
    assert set(VALUES) == set(_vocabularies())
    for kind, values in VALUES.items():
        assert tuple(member.value for member in kind) == values, kind.__name__


@pytest.mark.parametrize("kind", _vocabularies(), ids=lambda kind: kind.__name__)
def test_a_member_is_its_string_wherever_it_is_shown(kind: type[Word]) -> None:
    for member in kind:
        value = member.value
        assert type(value) is str
        assert member == value and hash(member) == hash(value)
        assert str(member) == f"{member}" == value
        assert repr(member) == repr(value)  # messages that show a value with !r read as before


def test_the_codec_writes_a_member_as_its_string_and_reads_back_an_equal_one() -> None:
    def claim(status: str, reason: str) -> ClaimRuns:
        return ClaimRuns(issued_at_us=7, epoch=1, claims=(SlotClaim("j", 5, 9, 1, status, reason),))

    with_members = encode_command(claim(RunStatus.SKIPPED, SkipReason.PAUSED))
    assert with_members == encode_command(claim("skipped", "paused"))
    (decoded,) = decode_command(with_members).claims
    assert type(decoded.status) is str
    assert (decoded.status, decoded.reason) == (RunStatus.SKIPPED, SkipReason.PAUSED)


# -- rejection codes --------------------------------------------------------------------------------


def test_every_rejection_code_has_a_grpc_status() -> None:
    assert set(REJECTION_CODES) == set(RejectionCode)
    assert all(isinstance(status, grpc.StatusCode) for status in REJECTION_CODES.values())


def _code_argument(call: ast.Call) -> ast.expr | None:
    """The code a `rejected(index, code, ...)` or `Rejection(code, ...)` call passes."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    position = {"rejected": 1, "Rejection": 0}.get(name)
    if position is None:
        return None
    keyword = next((k.value for k in call.keywords if k.arg == "code"), None)
    return keyword if keyword is not None else call.args[position] if len(call.args) > position else None


def rejection_codes_in_source(root: Path) -> dict[str, list[str]]:
    """code -> where it is passed, for every rejection built under `root`; a code that is neither
    a string literal nor a RejectionCode member is reported as `?LINE`."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        builders = {
            id(node) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "rejected"
        }
        inside_builder = {id(call) for node in ast.walk(tree) if id(node) in builders for call in ast.walk(node)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or id(node) in inside_builder:
                continue
            code = _code_argument(node)
            if code is None:
                continue
            where = f"{path.relative_to(root.parent)}:{node.lineno}"
            if isinstance(code, ast.Constant) and isinstance(code.value, str):
                found.setdefault(code.value, []).append(where)
            elif (
                isinstance(code, ast.Attribute)
                and isinstance(code.value, ast.Name)
                and code.value.id == "RejectionCode"
                and code.attr in RejectionCode.__members__
            ):
                found.setdefault(RejectionCode[code.attr].value, []).append(where)
            else:
                found.setdefault(f"?{where}", []).append(where)
    return found


def test_every_rejection_code_the_source_uses_is_a_member() -> None:
    used = rejection_codes_in_source(SCHEDULER)
    assert not [code for code in used if code not in RejectionCode.__members__.values()], used
    # The scan must see the core's rejections at all, or the check above proves nothing.
    assert len(used) >= 10 and any("core/jobs.py" in where for places in used.values() for where in places)


def test_every_rejection_code_is_still_produced_but_the_retired_one() -> None:
    assert set(rejection_codes_in_source(SCHEDULER)) == set(RejectionCode) - {RejectionCode.BAD_COMMAND}


def test_the_scan_reads_literals_members_and_refuses_anything_else(tmp_path: Path) -> None:
    (tmp_path / "mod.py").write_text(
        "def rejected(index, code, message):\n    return Rejection(code=code, message=message)\n"
        "a = rejected(1, 'stale_plan', 'x')\n"
        "b = rejected(1, RejectionCode.NOT_FOUND, 'x')\n"
        "c = ev.rejected(1, code=RejectionCode.INVALID, message='x')\n"
        "d = Rejection('made_up', 'x')\n"
        "e = rejected(1, some_code, 'x')\n"
    )
    found = rejection_codes_in_source(tmp_path)
    assert {"stale_plan", "not_found", "invalid", "made_up"} <= set(found)
    assert any(code.startswith("?") for code in found)
    assert "made_up" not in RejectionCode.__members__.values()


# -- proto counterparts and conversions -------------------------------------------------------------


@pytest.mark.parametrize("kind, descriptor, to_pb, from_pb", PROTO_COUNTERPARTS, ids=_PROTO_IDS)
def test_a_vocabulary_with_a_proto_enum_names_its_values(kind, descriptor, to_pb, from_pb) -> None:
    unspecified = descriptor.values_by_number[0]
    assert unspecified.name.endswith("UNSPECIFIED")
    assert {member.name for member in kind} == {value.name for value in descriptor.values if value.number != 0}


@pytest.mark.parametrize("kind, descriptor, to_pb, from_pb", PROTO_COUNTERPARTS, ids=_PROTO_IDS)
def test_convert_covers_every_member_both_ways(kind, descriptor, to_pb, from_pb) -> None:
    assert set(to_pb) == set(kind)
    for member in kind:
        number = descriptor.values_by_name[member.name].number
        assert to_pb[member] == number
        assert from_pb[number] is member
    assert set(from_pb) == {value.number for value in descriptor.values if value.number != 0}


# -- the worker SDK keeps its own enums: they say the same words -----------------------------------


def test_the_sdk_outcome_kinds_are_the_completion_kinds() -> None:
    # The SDK spells them as the proto does; replicated state holds the lower-case values.
    assert [kind.name for kind in worker.OutcomeKind] == [kind.name for kind in CompletionKind]
    for kind in CompletionKind:
        assert worker.OutcomeKind[kind.name].value == kind.name
        assert kind.value == kind.name.lower()


def test_the_sdk_cancel_reasons_for_lease_answers_are_the_lease_outcomes() -> None:
    stopping = [outcome for outcome in LeaseOutcome if outcome is not LeaseOutcome.OK]
    for outcome in stopping:
        assert worker.CancelReason[outcome.name].value == outcome.value


def test_the_sdk_shell_target_is_the_shell_target_kind() -> None:
    assert worker.SHELL_TARGET == TargetKind.SHELL
