"""RaftLog: pysyncobj used as a replicated log of bytes, never as the domain model.

Exactly one replicated method (`apply_entry(bytes)`) decodes a command and hands
it to the pure core with the entry's Raft log index. Snapshots go through the
core's codec via explicit hooks, and are encoded in the forked compaction child
so a large state never stalls the Raft tick thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from scheduler.core import Command, Result, State, apply, decode_command, decode_snapshot, encode_command
from scheduler.core.codec import CodecError, NewerLogFormat, encode_snapshot
from scheduler.core.log_format import LOG_FORMAT
from scheduler.core.results import rejected
from scheduler.core.vocabulary import RejectionCode
from scheduler.replication.apply_budget import ApplyBudgetMixin
from scheduler.replication.compaction_child import die_with_parent, guard_snapshot_installs
from scheduler.replication.digest import CHILD_NICENESS, digest_at
from scheduler.replication.errors import (
    EntryTooLarge,
    LogFormatNotEnabled,
    NodeHalted,
    NotLeader,
    OutcomeUnknown,
    Overloaded,
    ReplicationError,
    ReplicationTimeout,
)
from scheduler.replication.follower_append import FollowerAppendMixin
from scheduler.replication.journal import (
    EXIT_JOURNAL_CORRUPT,
    JOURNAL_NAME,
    TRACE_ENV,
    DurableJournal,
    JournalCorrupt,
    stop_node,
)
from scheduler.replication.journal_seam import building
from scheduler.replication.leader_exit import LeaderExitMixin, LeaderExitWatch
from scheduler.replication.pysyncobj_compat import (
    COMMIT_INDEX,
    CURRENT_LOG_INDEX,
    ELECTION_DEADLINE,
    FAIL_REASON,
    OTHER_NODES,
    RAFT_STATE,
    SEND_APPEND_ENTRIES,
    SEND_NEXT_NODE_IDX,
    TRANSPORT,
    RaftState,
    SyncObj,
    SyncObjConf,
    SyncObjConsumer,
    overrides,
    replicated,
)
from scheduler.replication.pysyncobj_compat import monotonic as pysyncobj_monotonic
from scheduler.replication.read_index import CONFIRMED, REFUSED, ReadConfirmer
from scheduler.replication.tickwatch import TickWatch
from scheduler.replication.transport import RaftcronTransport
from scheduler.replication.upgrades import (
    FormatBook,
    LogFormatMixin,
    UndecodableEntry,
    keepalive_message,
    own_log_format,
    proposal_log_format,
    proposal_refusal,
)

log = logging.getLogger("raftcron.replication")

# Largest encoded command we propose; see APPEND_BATCH_BYTES for why it matters.
MAX_ENTRY_BYTES = 1 << 20
APPEND_BATCH_BYTES = 4 << 20

# (command, result, state): the state just changed, handed over so no listener reaches into RaftLog for it.
ApplyListener = Callable[[Command, Result, State], None]
ROLE_NAMES = {RaftState.FOLLOWER: "follower", RaftState.CANDIDATE: "candidate", RaftState.LEADER: "leader"}


@dataclass(frozen=True)
class RaftTuning:
    """pysyncobj timing and compaction, in our units. Defaults were measured on a 2-core machine (bench/)."""

    election_timeout_min_s: float = 0.5
    election_timeout_max_s: float = 1.5
    # Batched appends every 10 ms with a 5 ms tick: ~11 ms per commit, large batches stay cheap.
    append_entries_period_s: float = 0.01
    tick_period_s: float = 0.005
    # An isolated leader steps down after this instead of pysyncobj's 30 s; epochs fence the rest.
    leader_fallback_timeout_s: float = 1.5
    connection_retry_s: float = 1.0
    # Every node sends each peer a no-op this often, so no link idles into pysyncobj's timeout.
    keepalive_period_s: float = 1.0
    # The leader sends new entries at the end of the tick that appended them, instead of at the
    # next append period: a commit costs a round trip instead of up to a period plus one.
    eager_append: bool = True
    # Entries are fdatasync'ed (once per tick) before this node acknowledges them or counts
    # itself toward their commit. Off: the same checksummed journal, written but never synced:
    # it survives killed processes, not a power loss of a majority.
    sync: bool = True
    # A follower whose link to the leader closed dials the leader's Raft port; refused, it stands
    # for election at its turn (0.2 s apart) instead of after its timeout (leader_exit.py).
    elect_when_leader_exits: bool = True
    compaction_min_entries: int = 50_000
    compaction_min_time_s: float = 600.0


@dataclass(frozen=True)
class RaftSettings:
    """Where this node's Raft lives and who its partners are, plus the tuning."""

    self_address: str
    partner_addresses: tuple[str, ...]
    data_dir: Path
    password: str | None
    tuning: RaftTuning = RaftTuning()

    def to_conf(self, on_state_changed: Callable[[int, int], None]) -> SyncObjConf:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.data_dir, 0o700)  # journal and dump files are pickles
        for path in self.data_dir.iterdir():  # left by an older version or another umask
            if path.is_file():
                os.chmod(path, 0o600)
        tuning = self.tuning
        return SyncObjConf(
            password=self.password,
            bindAddress=self.self_address,
            # The durable journal (journal.py) converts pysyncobj's "raft.journal" on first start.
            journalFile=str(self.data_dir / JOURNAL_NAME),
            fullDumpFile=str(self.data_dir / "raft.dump"),
            raftMinTimeout=tuning.election_timeout_min_s,
            raftMaxTimeout=tuning.election_timeout_max_s,
            appendEntriesPeriod=tuning.append_entries_period_s,
            autoTickPeriod=tuning.tick_period_s,
            leaderFallbackTimeout=tuning.leader_fallback_timeout_s,
            connectionRetryTime=tuning.connection_retry_s,
            connectionTimeout=max(3.5, tuning.election_timeout_max_s),
            # pysyncobj caches peer DNS for 600 s (30 s on failure): too long for a replaced
            # container that comes back with a new address.
            dnsCacheTime=30.0,
            dnsFailCacheTime=2.0,
            logCompactionMinEntries=tuning.compaction_min_entries,
            logCompactionMinTime=tuning.compaction_min_time_s,
            # pysyncobj splits an entry of at least this size into "transmissions" and
            # reassembles it wrongly (it compares chunk offsets with the unpickled length).
            # Entries are capped far below it (MAX_ENTRY_BYTES), so that path never runs.
            appendEntriesBatchSizeBytes=APPEND_BATCH_BYTES,
            useFork=True,
            dynamicMembershipChange=True,
            onStateChanged=on_state_changed,
        )


class _LazySnapshot:
    """Pickled by pysyncobj inside its forked compaction child: encoding happens there."""

    def __init__(self, state: State) -> None:
        self._state = state
        self._owner_pid = os.getpid()

    def __reduce__(self):
        if os.getpid() != self._owner_pid:  # in the forked child: yield the CPU to the nodes
            die_with_parent(self._owner_pid)
            os.nice(CHILD_NICENESS)
        return (bytes, (encode_snapshot(self._state),))


def apply_encoded(state: State, data: bytes, index: int, max_log_format: int = LOG_FORMAT) -> tuple[Command, Result]:
    """Decode one entry's bytes and apply them, as every replica (and an offline replay) must.
    An entry the core rejects or raises on is recorded as a rejection (the same on every
    replica). An entry that does not decode raises UndecodableEntry and changes nothing: a
    newer node decodes it, so recording a rejection here would leave this replica different."""
    try:
        command = decode_command(data, max_log_format)
    except CodecError as exc:
        raise UndecodableEntry(f"entry {index}", str(exc), older=isinstance(exc, NewerLogFormat)) from None
    try:
        return command, apply(state, command, index)
    except Exception:  # a raise here would wedge every replica on this entry
        log.critical("core raised on entry %d; recorded as a rejection", index, exc_info=True)
        return command, rejected(index, RejectionCode.INTERNAL_ERROR, "the core failed on this command")


class _CoreConsumer(SyncObjConsumer):
    def __init__(self, owner: RaftLog) -> None:
        self._owner = owner
        super().__init__()

    @replicated
    def apply_entry(self, data: bytes) -> Result:
        return self._owner._apply_entry(data)

    def _serialize(self) -> dict:
        return {"snapshot": _LazySnapshot(self._owner._state)}

    def _deserialize(self, data: dict) -> None:
        self._owner._restore(data["snapshot"])
        if self._syncObj is not None:
            restart_election_timeout(self._syncObj)


def hold_election_while_replaying(syncobj: SyncObj, replay_until: int) -> int:
    """Until a restarted node has applied what it had committed when it stopped, it does not stand
    for election; the `replay_until` still to reach (0: reached).

    Replaying a million jobs from its own journal takes a restarted follower many seconds of
    long ticks. Each time its election deadline passed in one, it stood for election, and its
    higher term deposed the healthy leader, which then won again with the longer log: five
    elections in 25 s (bench scale, a million jobs). Raft's pre-vote solves this in general;
    pysyncobj has none. The node still votes, and a commit index clamped below `replay_until`
    (a journal that lost its tail) ends the wait at the clamped index."""
    if not replay_until or syncobj.raftLastApplied >= min(replay_until, getattr(syncobj, COMMIT_INDEX)):
        return 0
    restart_election_timeout(syncobj)
    return replay_until


def restart_election_timeout(syncobj: SyncObj) -> None:
    """A follower waits a full election timeout from now, as a node that just started does.

    pysyncobj restores a snapshot (a dump at start, or one the leader sent) inside the tick that
    then checks the election deadline, set before it. A million jobs take seconds to restore, so
    the deadline had always passed: the restarted follower stood for election before it had read
    a single append, and its higher term deposed a healthy leader (bench scale, a million jobs)."""
    if getattr(syncobj, RAFT_STATE) == RaftState.LEADER:
        return
    conf = syncobj.conf
    timeout_s = conf.raftMinTimeout + (conf.raftMaxTimeout - conf.raftMinTimeout) * random.random()
    setattr(syncobj, ELECTION_DEADLINE, pysyncobj_monotonic() + timeout_s)


_FAILURES: dict[int, type[ReplicationError]] = {
    FAIL_REASON.QUEUE_FULL: Overloaded,
    FAIL_REASON.MISSING_LEADER: NotLeader,
    FAIL_REASON.REQUEST_DENIED: NotLeader,
    FAIL_REASON.NOT_LEADER: OutcomeUnknown,
    FAIL_REASON.LEADER_CHANGED: OutcomeUnknown,
    FAIL_REASON.DISCARDED: OutcomeUnknown,
    FAIL_REASON.UNKNOWN_OUTCOME: OutcomeUnknown,
}


# pysyncobj closes a link that has read nothing for its connection timeout (3.5 s) and reconnects
# after connection_retry_s. Followers send each other nothing in steady state, so a link between
# two followers was down about a fifth of the time, and a leader dying then cost a failed election
# (measured: term 1 -> 3 and 1.3-2.0 s to a new leader, instead of one election and ~0.6 s).
# pysyncobj ignores message types it does not know, so the keepalive is safe with older nodes.
# Each keepalive also says which log format its sender reads (upgrades.py); this is what a node of
# this version without the test cap sends.
KEEPALIVE_MESSAGE = keepalive_message(LOG_FORMAT)


class _RaftcronSyncObj(LogFormatMixin, FollowerAppendMixin, ApplyBudgetMixin, LeaderExitMixin, SyncObj):
    """pysyncobj's SyncObj with eight changes: its journal is synced and checksummed, and an
    append is answered only once its entries are synced (journal.py); every peer gets a
    keepalive once per period, which says the log format its sender reads (upgrades.py); the
    leader sends new entries in the tick that appended them (eager_append); a follower
    truncates only entries that conflict (follower_append); a tick applies committed entries
    for a bounded time (apply_budget); a follower reads its sockets before it judges the
    leader silent; and a follower whose leader's process exited stands without waiting out
    its timeout (leader_exit)."""

    def __init__(
        self,
        *args,
        keepalive_period_s: float,
        eager_append: bool = True,
        journal_sync: bool = True,
        elect_when_leader_exits: bool = True,
        **kwargs,
    ) -> None:
        # Set before SyncObj starts its tick thread, which calls _onTick.
        self.leader_exit_watch = LeaderExitWatch() if elect_when_leader_exits else None
        self._keepalive_period_s = keepalive_period_s
        self._next_keepalive = 0.0
        self._eager_append = eager_append
        self._journal_sync = journal_sync
        self._journal: DurableJournal | None = None
        # The commit index this node had acknowledged when it stopped: replayed before it stands.
        self._replay_until = 0
        self._held_answers: list[tuple] = []
        self.tick_watch = TickWatch()
        with building(self._open_journal):
            super().__init__(*args, **kwargs)

    def _open_journal(self, path: str) -> DurableJournal:
        conf = self.conf
        try:
            self._journal = DurableJournal(
                path, dump_path=conf.fullDumpFile, sync=self._journal_sync, trace_path=os.environ.get(TRACE_ENV) or None
            )
        except JournalCorrupt as exc:
            stop_node(
                f"refusing to start: {exc}. Restore this node's data directory from a backup, or "
                "wipe it and let the leader send it a snapshot",
                EXIT_JOURNAL_CORRUPT,
            )
        self._replay_until = self._journal.getRaftCommitIndex()
        return self._journal

    @overrides(SEND_NEXT_NODE_IDX)
    def _hold_answer(self, node, reset=False, nextNodeIdx=None, success=False):  # noqa: N803 (pysyncobj's names)
        # pysyncobj answers an append as soon as it has added the entries; hold the answer until
        # the end of the tick, when one sync covers every append the tick received.
        if nextNodeIdx is None:
            nextNodeIdx = getattr(self, CURRENT_LOG_INDEX)() + 1
        self._held_answers.append((node, reset, nextNodeIdx, success))

    def _sync_then_answer(self) -> None:
        if self._journal is not None:
            self._journal.sync()
        answers, self._held_answers = self._held_answers, []
        send = getattr(super(), SEND_NEXT_NODE_IDX)
        for node, reset, next_index, success in answers:
            send(node, reset=reset, nextNodeIdx=next_index, success=success)

    def _checkCommandsToApply(self):  # noqa: N802 (pysyncobj's name)
        # pysyncobj moves queued proposals into the leader's log here, then waits for the next
        # append period (10 ms) to send them. Sending at once, one message per peer for all the
        # entries of this tick, keeps the batching and takes the wait out of every commit.
        before = getattr(self, CURRENT_LOG_INDEX)()
        super()._checkCommandsToApply()
        if (
            self._eager_append
            and getattr(self, RAFT_STATE) == RaftState.LEADER
            and getattr(self, CURRENT_LOG_INDEX)() > before
        ):
            getattr(self, SEND_APPEND_ENTRIES)()
            # The followers write the entries meanwhile: the leader's own sync overlaps their
            # round trip instead of waiting behind it (after the poll) before the next commit loop.
            self._sync_then_answer()

    def _onTick(self, timeToWait=0.0):  # noqa: N802, N803 (pysyncobj's names)
        self.tick_watch.tick_started(ROLE_NAMES.get(getattr(self, RAFT_STATE), "unknown"))
        self._stand_if_leader_exited()
        self._read_before_electing()
        # The leader counts itself toward the commit of every entry it holds (pysyncobj's commit
        # loop, early in the tick): what it appended last tick must be on disk first.
        self._sync_then_answer()
        # Entries left over by the apply budget (apply_budget.py): apply them without waiting.
        super()._onTick(0.0 if self.apply_backlog > 0 else timeToWait)
        # After the poll that read this tick's appends: one sync, then their answers.
        self._sync_then_answer()
        now = time.monotonic()
        if now < self._next_keepalive:
            return
        self._next_keepalive = now + self._keepalive_period_s
        transport = getattr(self, TRANSPORT)
        if transport.ready:
            for node in list(getattr(self, OTHER_NODES)):
                transport.send(node, self.keepalive_message)

    def _read_before_electing(self) -> None:
        """pysyncobj checks a follower's election deadline at the start of a tick and reads its
        sockets only at the end: a follower whose tick thread was starved past the deadline
        deposed a healthy leader whose appends sat unread (a million queued runs: elections
        every 3-5 s, each new leader busy rebuilding its queue). Read first: an append from
        the leader pushes the deadline back."""
        self._replay_until = hold_election_while_replaying(self, self._replay_until)
        if (
            getattr(self, RAFT_STATE) != RaftState.LEADER
            and getattr(self, ELECTION_DEADLINE) < pysyncobj_monotonic()
            and getattr(self, TRANSPORT).ready
        ):
            self._poller.poll(0)


class RaftLog:
    def __init__(self, settings: RaftSettings, max_log_format: int | None = None) -> None:
        self.settings = settings
        # The newest log format this node reads (below LOG_FORMAT only under the test knob).
        self.log_format = own_log_format() if max_log_format is None else max_log_format
        self.formats = FormatBook()
        # Why this node stopped applying ("" while it applies), and who wants to know.
        self.halted = ""
        self._halted_syncobj: SyncObj | None = None
        self._halt_listeners: list[Callable[[str], None]] = []
        # Raft address -> node id, for messages that name nodes (the node sets it).
        self.name_of: Callable[[str], str] = lambda address: address
        self._state = State()
        self._lock = threading.RLock()
        self._applied = threading.Condition(self._lock)
        self._listeners: list[ApplyListener] = []
        self._role_listeners: list[Callable[[], None]] = []
        self._consumer = _CoreConsumer(self)
        self._syncobj: SyncObj | None = None

    # -- lifecycle -------------------------------------------------------
    def start(self) -> None:
        # pysyncobj creates its journal, meta and dump files (the dump in a forked child, at every
        # compaction) with the process umask: make it private for the life of the process.
        os.umask(0o077)
        conf = self.settings.to_conf(self._on_state_changed)
        self._syncobj = _RaftcronSyncObj(
            self.settings.self_address,
            list(self.settings.partner_addresses),
            conf,
            consumers=[self._consumer],
            transportClass=RaftcronTransport,  # frames capped and connections bounded (transport.py)
            log_format=self.log_format,
            format_book=self.formats,
            keepalive_period_s=self.settings.tuning.keepalive_period_s,
            eager_append=self.settings.tuning.eager_append,
            journal_sync=self.settings.tuning.sync,
            elect_when_leader_exits=self.settings.tuning.elect_when_leader_exits,
        )
        guard_snapshot_installs(self._syncobj)
        with self._lock:
            if self.halted and self._syncobj is not None:  # halted before the constructor returned
                self._syncobj, self._halted_syncobj = None, self._syncobj
                self._halted_syncobj.destroy()

    def close(self) -> None:
        """Stop Raft and wait for its tick thread: no apply, journal write or open port after this."""
        syncobj = self._syncobj or self._halted_syncobj
        if syncobj is not None:
            syncobj.destroy_synchronous()

    # -- the replicated path (runs on pysyncobj's tick thread) -----------
    def _apply_entry(self, data: bytes) -> Result | None:
        with self._lock:
            if self.halted:  # the rest of pysyncobj's batch: nothing more is applied
                return None
            # pysyncobj bumps raftLastApplied after the method returns: during it, +1 is this entry.
            index = self._syncobj.raftLastApplied + 1
            try:
                command, result = apply_encoded(self._state, data, index, self.log_format)
            except UndecodableEntry as exc:
                self._halt(exc)
                return None
            for listener in self._listeners:
                try:
                    listener(command, result, self._state)
                except Exception:  # a listener is local, never part of the replicated outcome
                    log.exception("apply listener failed on entry %d", index)
            self._applied.notify_all()
            return result

    def _restore(self, snapshot: bytes) -> None:
        with self._lock:
            if self.halted:
                return
            try:
                state = decode_snapshot(snapshot, self.log_format)
            except CodecError as exc:
                # pysyncobj would log the exception and go on from an empty state: halt instead.
                self._halt(UndecodableEntry("snapshot", str(exc), older=isinstance(exc, NewerLogFormat)))
                return
            self._state = state
            log.info("restored snapshot at index %d", self._state.applied_index)
            self._applied.notify_all()

    def _halt(self, why: UndecodableEntry) -> None:
        """Stop applying, for good: on pysyncobj's tick thread, under the state lock. Raising
        instead would make pysyncobj retry the entry forever (a wedged tick loop that still
        holds its leadership); recording a rejection would diverge. pysyncobj is told to stop
        (its tick thread ends after this tick: no vote, no append, no leadership, no
        compaction of a state that is no longer its log's), and the node exits (node.py)."""
        # The Raft handle moves before `halted` is set: a reader that sees `halted` (read without
        # the lock) also sees the stopped handle.
        syncobj, self._syncobj, self._halted_syncobj = self._syncobj, None, self._syncobj
        if syncobj is not None:
            syncobj.destroy()  # with autoTick: only sets a flag, the tick thread stops itself
        self.halted = str(why)
        log.critical("%s", self.halted)
        self._applied.notify_all()
        for listener in self._halt_listeners:
            try:
                listener(self.halted)
            except Exception:
                log.exception("halt listener failed")

    def add_halt_listener(self, listener: Callable[[str], None]) -> None:
        """Called once, on the tick thread under the state lock, when this node stops applying."""
        self._halt_listeners.append(listener)

    def _on_state_changed(self, old: int, new: int) -> None:
        log.info("raft role %s -> %s", ROLE_NAMES.get(old, old), ROLE_NAMES.get(new, new))
        for listener in self._role_listeners:
            listener()

    # -- proposing ------------------------------------------------------
    def propose(self, command: Command) -> Future[Result]:
        """Append `command`; the future resolves to the core's result once applied locally."""
        future: Future[Result] = Future()
        future.set_running_or_notify_cancel()

        def on_done(result: Result | None, error: int) -> None:
            if error == FAIL_REASON.SUCCESS and result is None:  # committed; this node halted before applying it
                future.set_exception(OutcomeUnknown(f"committed, but this node stopped applying: {self.halted}", ""))
            elif error == FAIL_REASON.SUCCESS:
                future.set_result(result)
            else:
                failure = _FAILURES.get(error, OutcomeUnknown)
                future.set_exception(failure(f"proposal failed: reason {error}", self.leader_address()))

        self._check_proposable(command)
        try:
            data = encode_command(command)
        except CodecError as exc:
            raise EntryTooLarge(str(exc)) from None
        if len(data) > MAX_ENTRY_BYTES:
            raise EntryTooLarge(
                f"{type(command).__name__} encodes to {len(data)} bytes, more than the {MAX_ENTRY_BYTES} a log entry holds"
            )
        self._consumer.apply_entry(data, callback=on_done)
        return future

    def _check_proposable(self, command: Command) -> None:
        """Nothing is proposed from a halted node, nor above the cluster version (upgrades.py)."""
        if self.halted:
            raise NodeHalted(self.halted, "")
        needed, what = proposal_log_format(command)
        if needed <= 1:  # every command of format 1: no lock taken on the hot path
            return
        with self._lock:
            cluster_version = self._state.cluster_version
        if needed <= cluster_version:
            return
        refusal = proposal_refusal(
            command, needed, cluster_version, self.raft_members(), self.log_formats(), self.name_of, what
        )
        if refusal is not None:
            raise LogFormatNotEnabled(refusal, self.leader_address())

    def log_formats(self) -> dict[str, int]:
        """Raft address -> the log format it advertised lately; this node's own included."""
        return {**self.formats.fresh(), self.settings.self_address: self.log_format}

    def submit(self, command: Command, timeout_s: float) -> Result:
        """propose() and wait; a timeout becomes ReplicationTimeout (the outcome is unknown)."""
        try:
            return self.propose(command).result(timeout=timeout_s)
        except TimeoutError:
            raise ReplicationTimeout(f"no answer within {timeout_s}s", self.leader_address()) from None

    # -- reading --------------------------------------------------------
    @contextlib.contextmanager
    def read(self) -> Iterator[State]:
        """Hold the state still while reading; keep the body short (it blocks applies)."""
        with self._lock:
            yield self._state

    def read_index(self, timeout_s: float) -> int:
        """On the leader: an index such that a read of this replica's state once it is applied
        reflects every write committed before the call, at no log entry (read_index.py).
        Applied here when it returns; NotLeader when this node is not (or stops being) the
        leader or no majority confirms it in time, ReplicationTimeout when the apply lags."""
        deadline = time.monotonic() + timeout_s
        if not self.is_leader():
            raise NotLeader("linearizable read refused: this node is not the leader", self.leader_address())
        confirmer = getattr(self, "_read_confirmer", None)  # made by the first read, kept for the node's life
        if confirmer is None:
            with self._lock:
                if (confirmer := getattr(self, "_read_confirmer", None)) is None:
                    confirmer = self._read_confirmer = ReadConfirmer(self._syncobj)
                    self._syncobj.addOnTickCallback(confirmer)
        step, index = confirmer.confirm(timeout_s)
        if step.outcome == REFUSED:
            raise NotLeader(f"linearizable read refused: {step.reason}", self.leader_address())
        if step.outcome != CONFIRMED:
            raise NotLeader(
                f"linearizable read: leadership not confirmed within {timeout_s}s ({step.reason})",
                self.leader_address(),
            )
        if not self.wait_applied(index, max(0.0, deadline - time.monotonic())):
            raise ReplicationTimeout(f"index {index} not applied within {timeout_s}s", self.leader_address())
        return index

    def wait_applied(self, index: int, timeout_s: float) -> bool:
        with self._lock:
            return self._applied.wait_for(lambda: self._state.applied_index >= index, timeout_s)

    def add_apply_listener(self, listener: ApplyListener) -> None:
        """Called on the tick thread after every apply, under the state lock, with the state the
        entry changed (read it there, never keep it): must not block."""
        with self._lock:
            self._listeners.append(listener)

    def remove_apply_listener(self, listener: ApplyListener) -> None:
        with self._lock:
            self._listeners.remove(listener)

    def add_role_listener(self, listener: Callable[[], None]) -> None:
        self._role_listeners.append(listener)

    def digest(self) -> str:
        return self.digest_at()[1]

    def digest_at(self) -> tuple[int, str]:
        """(applied index, state digest at it); a large state is digested in a forked child,
        so applies go on meanwhile (see digest.py)."""
        return digest_at(self.read)

    # -- raft facts -----------------------------------------------------
    def is_leader(self) -> bool:
        return self._syncobj is not None and self._syncobj._isLeader()

    def leader_address(self) -> str:
        leader = self._syncobj._getLeader() if self._syncobj else None
        return leader.address if leader is not None else ""

    def raft_status(self) -> dict:
        return self._syncobj.getStatus() if self._syncobj else {}

    def tick_stalls(self) -> tuple[int, float]:
        """Raft ticks that started late (see tickwatch.py) and the longest gap, since start."""
        watch = self._syncobj.tick_watch if self._syncobj else None
        return (watch.stalls, watch.longest_gap_s) if watch else (0, 0.0)

    def journal_syncs(self) -> tuple[int, list[int], float]:
        """Journal syncs since start: count, count per bucket of journal.SYNC_BUCKETS_S (+Inf
        last), total seconds. Zeros with raft.sync off."""
        journal = self._syncobj._journal if self._syncobj else None
        if journal is None:
            return 0, [], 0.0
        return journal.syncs, list(journal.sync_counts), journal.sync_seconds_total

    @property
    def term(self) -> int:
        return self._syncobj.raftCurrentTerm if self._syncobj else 0

    @property
    def commit_index(self) -> int:
        syncobj = self._syncobj
        if syncobj is None:
            return 0
        # Lowered for the length of each apply chunk (apply_budget.py): read the one held aside too.
        return max(syncobj.raftCommitIndex, syncobj.commit_index_held)

    @property
    def applied_index(self) -> int:
        if self._syncobj:
            return self._syncobj.raftLastApplied
        with self._lock:  # not started, or halted: what the state holds
            return self._state.applied_index

    def has_quorum(self) -> bool:
        return self._syncobj is not None and self._syncobj.hasQuorum

    def force_compaction(self) -> None:
        self._syncobj.forceLogCompaction()

    # -- membership: pysyncobj's own voter set ------------------------------------
    # pysyncobj applies a membership entry as soon as it is appended (leader) or received
    # (follower), replays it from the journal on restart and stores the voter set in its dump,
    # so a restarted node ends with the replicated membership whatever its configured
    # partners were. It does not refuse a second change while one is uncommitted (its guard
    # is never armed in 0.3.17), nor changes before a new leader committed its first entry
    # (that one it refuses): callers run one change at a time, on the leader.
    def raft_members(self) -> frozenset[str]:
        """Raft addresses pysyncobj counts as voters, this node included, as this node sees them."""
        if self._syncobj is None:
            return frozenset({self.settings.self_address, *self.settings.partner_addresses})
        for _ in range(9):
            try:  # the tick thread may change the set while it is copied
                others = self._syncobj.otherNodes
                break
            except RuntimeError:
                continue
        else:
            others = self._syncobj.otherNodes
        return frozenset({self.settings.self_address, *(node.address for node in others)})

    def connected_members(self) -> frozenset[str]:
        """Voters this node has a live connection to, itself included."""
        status = self.raft_status()
        prefix = "partner_node_status_server_"
        connected = {key[len(prefix) :] for key, value in status.items() if key.startswith(prefix) and value == 2}
        return frozenset({self.settings.self_address, *connected})

    def change_membership(self, add: bool, raft_address: str, timeout_s: float) -> None:
        """Append pysyncobj's add (or remove) entry for `raft_address` and wait until it commits."""
        future: Future[None] = Future()
        future.set_running_or_notify_cancel()

        def on_done(_result, error: int) -> None:
            if error == FAIL_REASON.SUCCESS:
                future.set_result(None)
            elif error == FAIL_REASON.REQUEST_DENIED:
                future.set_exception(
                    MembershipChangeRefused(
                        f"Raft refused to {'add' if add else 'remove'} {raft_address}: not leading, a new leader's "
                        "first entry is not committed yet, or the change is already in place",
                        self.leader_address(),
                    )
                )
            else:
                failure = _FAILURES.get(error, OutcomeUnknown)
                future.set_exception(failure(f"membership change failed: reason {error}", self.leader_address()))

        change = self._syncobj.addNodeToCluster if add else self._syncobj.removeNodeFromCluster
        change(raft_address, callback=on_done)
        try:
            future.result(timeout=timeout_s)
        except TimeoutError:
            raise ReplicationTimeout(
                f"membership change not committed within {timeout_s}s", self.leader_address()
            ) from None

    def transfer_leadership(self) -> bool:
        """Ask the most caught-up connected voter to take over; True if the request was sent."""
        syncobj = self._syncobj
        sent: Future[bool] = Future()
        sent.set_running_or_notify_cancel()

        def on_tick() -> None:
            # pysyncobj's transport belongs to its tick thread; tick callbacks run there, under a
            # lock that removeOnTickCallback also takes: so this only runs once, and is removed below.
            if not sent.done():
                syncobj.transferLeadership(callback=lambda _r, error: sent.set_result(error == FAIL_REASON.SUCCESS))

        syncobj.addOnTickCallback(on_tick)
        try:
            return sent.result(timeout=5.0)
        except TimeoutError:
            return False
        finally:
            syncobj.removeOnTickCallback(on_tick)


class MembershipChangeRefused(ReplicationError):
    """pysyncobj did not append the membership entry; nothing changed."""

    retry_safe = True
