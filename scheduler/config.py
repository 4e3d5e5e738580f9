"""Node configuration: one frozen dataclass, read from a YAML file, env and flags in one place.

Precedence: flag > environment (RAFTCRON_*) > file > default. The cluster secret
is read from RAFTCRON_CLUSTER_SECRET or a file, never from a command-line flag
(flags are visible to every user in the process list).

What a node refuses to start with is decided here too: `_validate` for any configuration,
`serving_refusal` for one that is about to serve (a secret and tokens, on loopback too, unless
`insecure` says otherwise); `with_generated_secret` gives a one-node loopback cluster a secret.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import hmac
import ipaddress
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

import yaml

from scheduler.leader.alert_delivery import parse_route
from scheduler.replication import RaftSettings, RaftTuning
from scheduler.rpc.attempt_output import DEFAULT_OUTPUT_TAIL_BYTES, MAX_OUTPUT_TAIL_BYTES
from scheduler.rpc.quotas import QuotaLimits
from scheduler.security.tls import TlsFiles


class ConfigError(ValueError):
    """A node configuration that must not start."""


# pysyncobj derives its Fernet key with PBKDF2 over a fixed salt: one secret gave one key in
# every deployment, and one dictionary of guesses served against all of them. Hence a key per
# cluster (raft_password) from a secret too long to guess.
MIN_SECRET_CHARS = 32
DEFAULT_CLUSTER_NAME = "raftcron"
RAFT_KEY_CONTEXT = b"raftcron raft key v1|"
GENERATED_SECRET_FILE = "cluster.secret"
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def raft_password(secret: str, cluster_name: str) -> str:
    """The password pysyncobj gets: a key of this cluster's own, so two clusters that share a
    secret (or a leaked one reused elsewhere) do not share a Raft key as long as their names differ."""
    return hmac.new(secret.encode(), RAFT_KEY_CONTEXT + cluster_name.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Peer:
    node_id: str
    raft_address: str
    grpc_address: str

    @classmethod
    def parse(cls, text: str) -> Peer:
        """`ID=RAFT_HOST:PORT/GRPC_HOST:PORT`, e.g. `n2=10.0.0.2:7100/10.0.0.2:7200`."""
        node_id, sep, addresses = text.partition("=")
        raft, slash, grpc_address = addresses.partition("/")
        if not (sep and slash and node_id and raft and grpc_address):
            raise ConfigError(f"peer {text!r} is not ID=RAFT_HOST:PORT/GRPC_HOST:PORT")
        return cls(node_id.strip(), _check_address(raft.strip()), _check_address(grpc_address.strip()))


# Per-job series on /metrics (scheduler/observability/job_metrics.py): the first N jobs by id.
DEFAULT_METRICS_MAX_JOBS = 1000
MAX_METRICS_MAX_JOBS = 100_000


@dataclass(frozen=True)
class NodeConfig:
    node_id: str
    peers: tuple[Peer, ...]
    data_dir: Path
    cluster_secret: str | None = field(default=None, repr=False)
    metrics_address: str = ""
    raft: RaftTuning = RaftTuning()
    claim_batch_size: int = 1000
    trigger_max_sleep_s: float = 1.0
    propose_timeout_s: float = 5.0
    # A lease not extended by a heartbeat within this expires; workers beat every third of it.
    lease_ttl_s: float = 10.0
    max_lease_wait_s: float = 30.0
    # Jobs with `jitter: auto` on round instants (minute 0) are spread over this window.
    # Keep it equal on every node: the offset is computed by whichever node leads.
    herd_window_s: float = 3600.0
    # Calls that wait for a commit (~12 ms) hold a thread each: 16 capped a node near 800 calls/s.
    grpc_threads: int = 64
    # owner (or "default") -> route: {webhook: URL} | {command: "prog args"} | {file: PATH} | {log: true},
    # each with optional template (json | slack) and timeout_s (scheduler/leader/alert_delivery.py)
    alert_routes: dict = field(default_factory=dict, hash=False)
    log_level: str = "INFO"
    log_format: str = "text"  # text | json
    # gRPC security: TLS (with client certificates when tls_client_auth) and bearer tokens of the
    # principals file. Required off loopback unless insecure_grpc says otherwise, explicitly.
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_ca_file: str = ""
    tls_client_auth: bool = False
    principals_file: str = ""
    # Serve gRPC without bearer tokens (and, off loopback, without TLS): anyone who can reach
    # the port may call every RPC. Never implied, not even on loopback (shared by every user of
    # the machine). `insecure_grpc`, its older name, still sets it.
    insecure: bool = False
    # Part of the Raft key (raft_password): clusters that share a secret must differ in name.
    cluster_name: str = DEFAULT_CLUSTER_NAME
    # The dashboard pages show every job, run and alert; they ask for a token only when the node
    # has a principals file. Off loopback without one, it must be accepted explicitly.
    insecure_dashboard: bool = False
    # This node joins a running cluster (`raftcron cluster add` makes it a voter): its peers are
    # the current members plus itself, so their count may be even. Kept after joining: harmless.
    join: bool = False
    # Quotas per owner and the write rate per principal (see scheduler/rpc/quotas.py).
    quotas: QuotaLimits = field(default_factory=QuotaLimits, hash=False)
    # gRPC server reflection (grpcurl, grpcui): the schema only, which proto/ publishes anyway.
    grpc_reflection: bool = True
    # Per attempt, the last bytes of stdout and of stderr this node keeps of a completion it
    # proposes (each); 0 keeps none (docs/design/output-per-attempt.md has the replicated bound).
    output_tail_bytes: int = DEFAULT_OUTPUT_TAIL_BYTES
    # Jobs with per-job series on /metrics; past it, jobs are left out in id order and counted
    # (docs/design/per-job-metrics.md).
    metrics_max_jobs: int = DEFAULT_METRICS_MAX_JOBS

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def insecure_grpc(self) -> bool:
        return self.insecure

    @property
    def every_address_loopback(self) -> bool:
        addresses = [a for p in self.peers for a in (p.raft_address, p.grpc_address)]
        return all(_is_loopback(a) for a in addresses + ([self.metrics_address] if self.metrics_address else []))

    @property
    def me(self) -> Peer:
        return next(peer for peer in self.peers if peer.node_id == self.node_id)

    def peer_by_raft_address(self, raft_address: str) -> Peer | None:
        return next((peer for peer in self.peers if peer.raft_address == raft_address), None)

    def tls_files(self) -> TlsFiles | None:
        if not self.tls_cert_file:
            return None
        return TlsFiles(self.tls_cert_file, self.tls_key_file, self.tls_ca_file, self.tls_client_auth)

    def raft_settings(self) -> RaftSettings:
        return RaftSettings(
            self_address=self.me.raft_address,
            partner_addresses=tuple(p.raft_address for p in self.peers if p.node_id != self.node_id),
            data_dir=self.data_dir / "raft",
            password=raft_password(self.cluster_secret, self.cluster_name) if self.cluster_secret else None,
            tuning=self.raft,
        )


def _check_address(address: str) -> str:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"address {address!r} is not HOST:PORT")
    return address


def _is_loopback(address: str) -> bool:
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _validate(config: NodeConfig) -> None:
    if not config.peers:
        raise ConfigError("no peers: list every member, this node included")
    ids = [p.node_id for p in config.peers]
    addresses = [p.raft_address for p in config.peers] + [p.grpc_address for p in config.peers]
    if len(set(ids)) != len(ids) or len(set(addresses)) != len(addresses):
        raise ConfigError("peer ids and addresses must be unique")
    if config.node_id not in ids:
        raise ConfigError(f"node id {config.node_id!r} is not among the peers {ids}")
    # Only a cluster's first configuration must be odd; membership changes pass through even sizes.
    if len(config.peers) % 2 == 0 and not config.join:
        raise ConfigError(
            f"{len(config.peers)} members: use an odd number (3 or 5) so a majority survives "
            "(a node joining a running cluster is started with --join)"
        )
    if config.cluster_secret is None and not config.every_address_loopback:
        raise ConfigError(
            "refusing to start without a cluster secret: Raft messages are pickles, and anyone who can "
            "reach the Raft port could run code here. Set RAFTCRON_CLUSTER_SECRET or cluster_secret_file "
            "(only a one-node loopback cluster generates its own)."
        )
    if config.cluster_secret is not None and len(config.cluster_secret) < MIN_SECRET_CHARS:
        raise ConfigError(
            f"the cluster secret must be at least {MIN_SECRET_CHARS} characters (this one has "
            f"{len(config.cluster_secret)}); generate one with: python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'"
        )
    if not isinstance(config.cluster_name, str) or not _CLUSTER_NAME.fullmatch(config.cluster_name):
        raise ConfigError(f"cluster_name {config.cluster_name!r} must be 1-64 letters, digits, '.', '_' or '-'")
    if bool(config.tls_cert_file) != bool(config.tls_key_file):
        raise ConfigError("tls cert_file and key_file go together")
    if config.tls_client_auth and not (config.tls_cert_file and config.tls_ca_file):
        raise ConfigError("tls client_auth needs cert_file, key_file and the ca_file that signs client certificates")
    grpc_exposed = [a for a in (p.grpc_address for p in config.peers) if not _is_loopback(a)]
    if grpc_exposed and not (config.tls_cert_file and config.principals_file) and not config.insecure:
        raise ConfigError(
            f"refusing to serve gRPC on {grpc_exposed[0]} without TLS and bearer tokens: anyone who can reach "
            "it could change jobs and lease runs. Set tls.cert_file, tls.key_file and principals_file (see the "
            "README, Security), or insecure: true to accept that on a network you trust."
        )
    if (
        config.metrics_address
        and not _is_loopback(config.metrics_address)
        and not config.principals_file
        and not config.insecure_dashboard
    ):
        raise ConfigError(
            f"refusing to serve the dashboard on {config.metrics_address} without bearer tokens: anyone who can "
            "reach it could read every job, run and alert. Set principals_file (its pages then want a token "
            "of a role that may read), keep metrics on loopback, or set insecure_dashboard: true to accept "
            "that on a network you trust."
        )
    positive = ("claim_batch_size", "trigger_max_sleep_s", "propose_timeout_s", "lease_ttl_s", "max_lease_wait_s")
    if any(getattr(config, name) <= 0 for name in positive):
        raise ConfigError(f"{', '.join(positive)} must be positive")
    if not 4 <= config.grpc_threads <= 1024:
        raise ConfigError("grpc_threads must be between 4 and 1024")
    if config.log_format not in ("text", "json"):
        raise ConfigError(f"log_format {config.log_format!r} is not text or json")
    if not 0 <= config.herd_window_s <= 86_400:
        raise ConfigError("herd_window_s must be between 0 and 86400")
    if not isinstance(config.output_tail_bytes, int) or not 0 <= config.output_tail_bytes <= MAX_OUTPUT_TAIL_BYTES:
        raise ConfigError(f"output_tail_bytes must be a whole number from 0 to {MAX_OUTPUT_TAIL_BYTES}")
    if not isinstance(config.metrics_max_jobs, int) or not 0 <= config.metrics_max_jobs <= MAX_METRICS_MAX_JOBS:
        raise ConfigError(f"metrics_max_jobs must be a whole number from 0 to {MAX_METRICS_MAX_JOBS}")
    for owner, route in config.alert_routes.items():
        try:
            parse_route(owner, route)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    tuning = config.raft
    if not 0 < tuning.append_entries_period_s * 3 < tuning.election_timeout_min_s < tuning.election_timeout_max_s:
        raise ConfigError("need 3 x append_entries_period_s < election_timeout_min_s < election_timeout_max_s")
    if not 0 < tuning.keepalive_period_s < max(3.5, tuning.election_timeout_max_s) / 2:
        raise ConfigError(
            "keepalive_period_s must be positive and under half of pysyncobj's connection timeout "
            "(3.5 s, or election_timeout_max_s if larger)"
        )
    if not isinstance(tuning.eager_append, bool):
        raise ConfigError(f"raft.eager_append must be true or false, got {tuning.eager_append!r}")
    if not isinstance(tuning.elect_when_leader_exits, bool):
        raise ConfigError(f"raft.elect_when_leader_exits must be true or false, got {tuning.elect_when_leader_exits!r}")
    if not isinstance(tuning.sync, bool):
        raise ConfigError(
            f"raft.sync must be true or false, got {tuning.sync!r} (false: acknowledged writes "
            "survive killed processes, not a power loss of a majority)"
        )


def serving_refusal(config: NodeConfig) -> str | None:
    """Why this node must not serve, or None. Loopback is no exception: it is shared by every
    user of the machine, so without a secret any of them could run code through the Raft port,
    and without tokens call every RPC."""
    if config.cluster_secret is None:
        return (
            f"refusing to start without a cluster secret: the {len(config.peers)} members of a loopback "
            "cluster must share one, and Raft messages are pickles. Write one to a file only you can read "
            "(python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > FILE; chmod 600 FILE) and set "
            "cluster_secret_file (or RAFTCRON_CLUSTER_SECRET_FILE) on every member; `raftcron dev` does it for you."
        )
    if not config.principals_file and not config.insecure:
        return (
            "refusing to serve gRPC without bearer tokens: anyone who can reach it, on loopback every user of "
            "this machine, could change jobs and lease runs. Set principals_file (`raftcron credentials DIR` "
            "writes one; see the README, Security), or insecure: true to accept that."
        )
    return None


def insecure_warning(config: NodeConfig) -> str:
    exposed = [p.grpc_address for p in config.peers if not _is_loopback(p.grpc_address)]
    who = f"anyone who can reach {exposed[0]}" if exposed else "anyone on this machine"
    return f"insecure: gRPC without tokens; {who} can call every RPC"


def with_generated_secret(config: NodeConfig) -> tuple[NodeConfig, Path | None]:
    """A one-node loopback cluster without a secret gets one: read from, or created in,
    `<data_dir>/cluster.secret` (0600). Returns the config and that file (None: nothing to do).
    A cluster of several members needs them to share one, which this node cannot arrange."""
    if config.cluster_secret is not None or len(config.peers) != 1 or not config.every_address_loopback:
        return config, None
    path = config.data_dir / GENERATED_SECRET_FILE
    config.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if os.stat(path).st_mode & 0o077:
            raise ConfigError(f"the cluster secret file {str(path)!r} is readable by others: chmod 600 it") from None
        return dataclasses.replace(config, cluster_secret=_read_secret(str(path))), path
    secret = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    return dataclasses.replace(config, cluster_secret=secret), path


def add_node_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="YAML node config file (env RAFTCRON_CONFIG)")
    parser.add_argument("--node-id", help="this node's id (env RAFTCRON_NODE_ID)")
    parser.add_argument(
        "--peer",
        action="append",
        metavar="ID=RAFT_ADDR/GRPC_ADDR",
        help="a cluster member, this node included; repeat per member (env RAFTCRON_PEERS, comma-separated)",
    )
    parser.add_argument("--data-dir", help="where the Raft journal and snapshots live (env RAFTCRON_DATA_DIR)")
    parser.add_argument("--metrics", help="HOST:PORT for Prometheus metrics (env RAFTCRON_METRICS)")
    parser.add_argument(
        "--cluster-secret-file", help="file holding the cluster secret (env RAFTCRON_CLUSTER_SECRET_FILE)"
    )
    parser.add_argument(
        "--join",
        action="store_true",
        default=None,
        help="join a running cluster: --peer lists its current members and this node (env RAFTCRON_JOIN)",
    )
    parser.add_argument("--tls-cert", help="PEM certificate served on gRPC (env RAFTCRON_TLS_CERT_FILE)")
    parser.add_argument("--tls-key", help="its PEM private key (env RAFTCRON_TLS_KEY_FILE)")
    parser.add_argument("--tls-ca", help="PEM CA of nodes and client certificates (env RAFTCRON_TLS_CA_FILE)")
    parser.add_argument("--principals-file", help="YAML principals with hashed tokens (env RAFTCRON_PRINCIPALS_FILE)")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING... (env RAFTCRON_LOG_LEVEL)")
    parser.add_argument("--log-format", help="text or json (env RAFTCRON_LOG_FORMAT; default text)")


def _read_secret(path: str) -> str:
    try:
        secret = Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the cluster secret file {path!r}: {exc.strerror}") from None
    if not secret:
        raise ConfigError(f"the cluster secret file {path!r} is empty")
    return secret


def load_node_config(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> NodeConfig:
    file_path = args.config or environ.get("RAFTCRON_CONFIG")
    doc: dict = {}
    if file_path:
        try:
            doc = yaml.safe_load(Path(file_path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read config file {file_path!r}: {exc}") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"config file {file_path!r} must hold a mapping")

    def pick(flag_value, env_name: str, key: str, default=None):
        if flag_value not in (None, []):
            return flag_value
        if environ.get(env_name):
            return environ[env_name]
        return doc.get(key, default)

    peers_value = pick(args.peer, "RAFTCRON_PEERS", "peers", [])
    if isinstance(peers_value, str):
        peers_value = [p for p in peers_value.split(",") if p.strip()]
    peers = tuple(_peer_from(item) for item in peers_value)
    secret = environ.get("RAFTCRON_CLUSTER_SECRET") or None
    secret_file = pick(args.cluster_secret_file, "RAFTCRON_CLUSTER_SECRET_FILE", "cluster_secret_file")
    if secret is None and secret_file:
        secret = _read_secret(secret_file)
    if "cluster_secret" in doc:
        raise ConfigError("put the secret in cluster_secret_file, not in the config file itself")
    node_id = pick(args.node_id, "RAFTCRON_NODE_ID", "node_id")
    data_dir = pick(args.data_dir, "RAFTCRON_DATA_DIR", "data_dir")
    if not node_id or not data_dir:
        raise ConfigError("node_id and data_dir are required (flags, RAFTCRON_* env or config file)")
    tls_doc = doc.get("tls", {}) or {}
    if not isinstance(tls_doc, dict) or (unknown := set(tls_doc) - {"cert_file", "key_file", "ca_file", "client_auth"}):
        raise ConfigError("tls takes cert_file, key_file, ca_file and client_auth")
    known = {f.name for f in fields(RaftTuning)}
    raft_doc = doc.get("raft", {}) or {}
    if unknown := set(raft_doc) - known:
        raise ConfigError(f"unknown raft settings {sorted(unknown)}; known: {sorted(known)}")
    tunables = (
        "claim_batch_size",
        "trigger_max_sleep_s",
        "propose_timeout_s",
        "lease_ttl_s",
        "max_lease_wait_s",
        "herd_window_s",
        "alert_routes",
        "grpc_threads",
        "output_tail_bytes",
        "metrics_max_jobs",
    )
    insecure = _flag(pick(None, "RAFTCRON_INSECURE", "insecure", False), "insecure")
    insecure_grpc = _flag(pick(None, "RAFTCRON_INSECURE_GRPC", "insecure_grpc", False), "insecure_grpc")
    extra = {k: doc[k] for k in tunables if k in doc}
    if "quotas" in doc:
        extra["quotas"] = _quotas_from(doc["quotas"])
    return NodeConfig(
        node_id=str(node_id),
        peers=peers,
        data_dir=Path(data_dir),
        cluster_secret=secret,
        metrics_address=pick(args.metrics, "RAFTCRON_METRICS", "metrics", "") or "",
        raft=RaftTuning(**raft_doc),
        log_level=str(pick(args.log_level, "RAFTCRON_LOG_LEVEL", "log_level", "INFO")).upper(),
        log_format=str(pick(args.log_format, "RAFTCRON_LOG_FORMAT", "log_format", "text")).lower(),
        join=_flag(pick(getattr(args, "join", None), "RAFTCRON_JOIN", "join", False), "join"),
        tls_cert_file=str(
            pick(getattr(args, "tls_cert", None), "RAFTCRON_TLS_CERT_FILE", "", tls_doc.get("cert_file", "")) or ""
        ),
        tls_key_file=str(
            pick(getattr(args, "tls_key", None), "RAFTCRON_TLS_KEY_FILE", "", tls_doc.get("key_file", "")) or ""
        ),
        tls_ca_file=str(
            pick(getattr(args, "tls_ca", None), "RAFTCRON_TLS_CA_FILE", "", tls_doc.get("ca_file", "")) or ""
        ),
        tls_client_auth=_flag(
            pick(None, "RAFTCRON_TLS_CLIENT_AUTH", "", tls_doc.get("client_auth", False)), "tls.client_auth"
        ),
        principals_file=str(
            pick(getattr(args, "principals_file", None), "RAFTCRON_PRINCIPALS_FILE", "principals_file", "") or ""
        ),
        insecure=insecure or insecure_grpc,
        cluster_name=str(pick(None, "RAFTCRON_CLUSTER_NAME", "cluster_name", DEFAULT_CLUSTER_NAME)),
        insecure_dashboard=_flag(
            pick(None, "RAFTCRON_INSECURE_DASHBOARD", "insecure_dashboard", False), "insecure_dashboard"
        ),
        grpc_reflection=_flag(pick(None, "RAFTCRON_GRPC_REFLECTION", "grpc_reflection", True), "grpc_reflection"),
        **extra,
    )


def _quotas_from(doc) -> QuotaLimits:
    known = {f.name for f in fields(QuotaLimits)}
    if not isinstance(doc, dict):
        raise ConfigError(f"quotas must be a mapping with keys among {', '.join(sorted(known))}")
    if unknown := set(doc) - known:
        raise ConfigError(f"unknown quotas settings {sorted(unknown)}; quotas takes {', '.join(sorted(known))}")
    try:
        return QuotaLimits(
            **{**doc, "owners": dict(doc.get("owners") or {}), "principals": dict(doc.get("principals") or {})}
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc)) from None


def _flag(value, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("", "0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false, got {value!r}")


def _peer_from(item) -> Peer:
    if isinstance(item, str):
        return Peer.parse(item)
    if isinstance(item, dict) and set(item) == {"id", "raft", "grpc"}:
        return Peer(str(item["id"]), _check_address(str(item["raft"])), _check_address(str(item["grpc"])))
    raise ConfigError(f"peer {item!r} must be ID=RAFT/GRPC or a mapping with keys id, raft, grpc")
