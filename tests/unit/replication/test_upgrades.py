"""Rolling upgrades, the pure parts: advertisements, the proposal guard, the raise decision, halting."""

from __future__ import annotations

import inspect

import grpc
import pytest

from scheduler import replication
from scheduler.core.codec import encode_command, encode_snapshot
from scheduler.core.commands import ReadBarrier, SetClusterVersion
from scheduler.core.log_format import LOG_FORMAT
from scheduler.core.state import State
from scheduler.leader.cluster_version import next_cluster_version
from scheduler.replication import LogFormatNotEnabled, ReplicationError
from scheduler.replication.pysyncobj_compat import ON_MESSAGE_RECEIVED
from scheduler.replication.raftlog import KEEPALIVE_MESSAGE, apply_encoded
from scheduler.replication.upgrades import (
    TEST_CAP_ENV,
    FormatBook,
    LogFormatMixin,
    UndecodableEntry,
    advertised_format,
    keepalive_message,
    laggards,
    own_log_format,
    proposal_refusal,
)
from scheduler.rpc.cluster import node_ready
from scheduler.rpc.errors import REPLICATION_CODES, abort_replication
from tests.fakes import ImmediateRaftLog
from tests.unit.rpc.test_rpc_errors import Aborted, FakeContext

N1, N2, N3 = "10.0.0.1:7100", "10.0.0.2:7100", "10.0.0.3:7100"
NAMES = {N1: "n1", N2: "n2", N3: "n3"}
RAISE = SetClusterVersion(1, version=2, epoch=1)


# -- advertisements -------------------------------------------------------------------------


def test_a_keepalive_says_what_its_sender_reads_and_an_old_one_means_1() -> None:
    assert advertised_format(keepalive_message(2)) == 2
    assert advertised_format({"type": "raftcron_keepalive"}) == 1  # what nodes before this version send
    assert advertised_format(KEEPALIVE_MESSAGE) == LOG_FORMAT
    assert advertised_format({"type": "append_entries"}) is None
    for junk in ("2", None, True, -4, 0):
        assert advertised_format({"type": "raftcron_keepalive", "log_format": junk}) == 1


def test_the_book_forgets_what_it_has_not_heard_lately() -> None:
    now = [100.0]
    book = FormatBook(clock_s=lambda: now[0])
    book.record(N2, 2)
    now[0] = 103.0
    book.record(N3, 1)
    assert book.fresh(max_age_s=5.0) == {N2: 2, N3: 1}
    now[0] = 106.0
    assert book.fresh(max_age_s=5.0) == {N3: 1}


class _PysyncobjStandIn:
    def __init__(self, *args, **kwargs) -> None:
        self.passed_on = []

    def _pass_on(self, node, message):
        self.passed_on.append(message)


setattr(_PysyncobjStandIn, ON_MESSAGE_RECEIVED, _PysyncobjStandIn._pass_on)


class _Adapter(LogFormatMixin, _PysyncobjStandIn):
    pass


def test_the_mixin_reads_keepalives_and_passes_everything_else_on() -> None:
    book = FormatBook()
    adapter = _Adapter(log_format=1, format_book=book)
    assert adapter.keepalive_message == {"type": "raftcron_keepalive", "log_format": 1}
    node = type("Node", (), {"address": N3})()
    receive = getattr(adapter, ON_MESSAGE_RECEIVED)
    receive(node, {"type": "raftcron_keepalive", "log_format": 2})
    receive(node, {"type": "append_entries", "term": 1})
    assert book.fresh() == {N3: 2}
    assert adapter.passed_on == [{"type": "append_entries", "term": 1}]


def test_the_test_cap_comes_from_the_environment_and_is_checked() -> None:
    assert own_log_format({}) == LOG_FORMAT
    assert own_log_format({TEST_CAP_ENV: "1"}) == 1
    assert own_log_format({TEST_CAP_ENV: "2"}) == 2
    for bad in ("0", str(LOG_FORMAT + 1), "one"):
        with pytest.raises(ValueError, match=TEST_CAP_ENV):
            own_log_format({TEST_CAP_ENV: bad})


# -- the guard and the raise ----------------------------------------------------------------


def test_a_format_1_command_is_always_proposable() -> None:
    assert proposal_refusal(ReadBarrier(1), 1, 1, [N1, N2, N3], {N1: 2}) is None


def test_a_command_above_the_cluster_version_is_refused_naming_the_nodes_to_upgrade() -> None:
    advertised = {N1: 2, N2: 2, N3: 1}
    message = proposal_refusal(RAISE, 2, 1, [N1, N2, N3], advertised, NAMES.get)
    assert (
        message
        == "the cluster runs log format 1; upgrade n3 (advertises 1) before using SetClusterVersion (log format 2)"
    )
    silent = proposal_refusal(RAISE, 2, 1, [N1, N2, N3], {N1: 2, N2: 2}, NAMES.get)
    assert "upgrade n3 (not heard from)" in silent


def test_the_raise_itself_passes_once_every_voter_reads_it() -> None:
    assert proposal_refusal(RAISE, 2, 1, [N1, N2, N3], {N1: 2, N2: 2, N3: 2}) is None
    assert laggards(2, [N1, N2, N3], {N1: 2, N2: 2, N3: 2}) == []


def test_once_raised_format_2_commands_pass_whatever_was_heard() -> None:
    # The replicated version decides, so every node refuses the same commands.
    assert proposal_refusal(RAISE, 2, 2, [N1, N2, N3], {}) is None


def test_the_leader_raises_only_when_every_voter_has_advertised() -> None:
    assert next_cluster_version(1, [N1, N2, N3], {N1: 2, N2: 2, N3: 1}) is None
    assert next_cluster_version(1, [N1, N2, N3], {N1: 2, N2: 2}) is None
    assert next_cluster_version(1, [N1, N2, N3], {N1: 2, N2: 2, N3: 2}) == 2
    # A node that is not a voter (joining, removed) does not hold it back.
    assert next_cluster_version(1, [N1, N2], {N1: 2, N2: 2, N3: 1}) == 2
    assert next_cluster_version(2, [N1, N2, N3], {N1: 2, N2: 2, N3: 2}) is None
    assert next_cluster_version(2, [N1, N2, N3], {N1: 1, N2: 2, N3: 2}) is None  # never down
    assert next_cluster_version(1, [], {}) is None


# -- every replication error has a status ---------------------------------------------------


def test_every_replication_error_class_has_a_grpc_status_of_its_own() -> None:
    classes = [obj for _, obj in inspect.getmembers(replication, inspect.isclass) if issubclass(obj, ReplicationError)]
    listed = [error_type for error_type, _code, _advice in REPLICATION_CODES]
    missing = [cls.__name__ for cls in classes if cls not in listed]
    assert not missing, f"map {missing} in scheduler/rpc/errors.py REPLICATION_CODES"


def test_a_refused_format_reaches_the_client_as_failed_precondition_with_the_names() -> None:
    text = "the cluster runs log format 1; upgrade n3 (advertises 1) before using SetClusterVersion (log format 2)"
    with pytest.raises(Aborted) as aborted:
        abort_replication(FakeContext(), LogFormatNotEnabled(text))
    code, details = aborted.value.args
    assert code == grpc.StatusCode.FAILED_PRECONDITION and text in details


# -- halting instead of diverging -----------------------------------------------------------


def test_an_entry_this_node_cannot_decode_changes_nothing_and_says_upgrade() -> None:
    state = State(applied_index=6)
    before = encode_snapshot(state)
    with pytest.raises(
        UndecodableEntry, match=r"this node is older than the log: upgrade it \(entry 7: SetClusterVersion"
    ):
        apply_encoded(state, encode_command(RAISE), 7, max_log_format=1)
    with pytest.raises(UndecodableEntry, match=r"older than the log.*entry 7: unknown command format version 9"):
        apply_encoded(state, b"\x09from a newer node", 7)
    with pytest.raises(UndecodableEntry, match="cannot decode the log") as damaged:
        apply_encoded(state, b"\x01\xc1", 7)  # 0xc1 is never valid msgpack
    assert not damaged.value.older
    assert encode_snapshot(state) == before  # not even the applied index moved


def test_an_entry_the_core_rejects_is_still_recorded_as_applied() -> None:
    state = State()
    command, result = apply_encoded(state, encode_command(RAISE), 1)  # no epoch yet: rejected the same everywhere
    assert command == RAISE and result.rejection.code == "stale_epoch"
    assert state.applied_index == 1 and state.cluster_version == 1


def test_a_halted_node_is_not_ready() -> None:
    raftlog = ImmediateRaftLog()
    raftlog.halted = "this node is older than the log: upgrade it (entry 7: ...)"
    assert node_ready(raftlog, config=None) is False  # before looking at leaders or config
