"""How every command reaches the cluster: credential flags over their RAFTCRON_* variables, one client."""

from __future__ import annotations

import argparse
import math
import os

# Global credential flags and the variables they override (`raftcron dev` prints the variables).
CREDENTIAL_FLAGS = (
    ("ca", "RAFTCRON_CA"),
    ("token_file", "RAFTCRON_TOKEN_FILE"),
    ("client_cert", "RAFTCRON_CLIENT_CERT"),
    ("client_key", "RAFTCRON_CLIENT_KEY"),
)


def credential_environ(args, environ=os.environ) -> dict[str, str]:
    """The environment with the credential flags given on the command line written over it."""
    merged = dict(environ)
    for flag, name in CREDENTIAL_FLAGS:
        if getattr(args, flag, None):
            merged[name] = getattr(args, flag)
            if name == "RAFTCRON_TOKEN_FILE":
                merged.pop("RAFTCRON_TOKEN", None)
    if getattr(args, "insecure", False):
        merged["RAFTCRON_INSECURE"] = "1"
    return merged


CLI_OUTCOME_RETRIES = 3


def cluster_client(args):
    from worker import ClusterClient, Credentials, parse_cluster

    credentials = Credentials.from_env(credential_environ(args))
    # A write cut short by a leader change is sent again with its request id: the cluster applies
    # it once either way, whereas the operator running the command again would trigger twice.
    return ClusterClient(
        parse_cluster(args.cluster),
        timeout_s=args.timeout,
        credentials=credentials,
        outcome_retries=CLI_OUTCOME_RETRIES,
    )


DEFAULT_CLUSTER = "127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203"


def seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def add_global_flags(parser: argparse.ArgumentParser, *, repeated: bool = False) -> None:
    """The options every cluster command takes, before or after its name.

    The copies a subcommand gets (`repeated`) default to SUPPRESS: argparse lets a subparser write
    every default it has over the namespace, so with real defaults there `raftcron --cluster H runs`
    would quietly lose H. Suppressed, a copy sets its value only when given after the subcommand.
    """

    def default(value):
        return argparse.SUPPRESS if repeated else value

    group = parser.add_argument_group("cluster options (before or after the command)") if repeated else parser
    group.add_argument(
        "--cluster",
        default=default(os.environ.get("RAFTCRON_CLUSTER", DEFAULT_CLUSTER)),
        help="gRPC addresses host:port,... of any nodes (env RAFTCRON_CLUSTER; default "
        + (os.environ.get("RAFTCRON_CLUSTER") or DEFAULT_CLUSTER).replace("%", "%%")
        + ")",
    )
    group.add_argument("--timeout", type=seconds, default=default(10.0), help="seconds per call (default 10)")
    add_credential_flags(group, default)


def add_credential_flags(parser, default=lambda value: value) -> None:
    """TLS and token flags; each overrides its RAFTCRON_* variable (the token itself only comes
    from RAFTCRON_TOKEN or a file: a flag would show it in the process list)."""
    parser.add_argument(
        "--ca", default=default(None), help="PEM CA that signs the nodes' certificates; turns TLS on (env RAFTCRON_CA)"
    )
    parser.add_argument(
        "--token-file",
        default=default(None),
        help="file holding a bearer token (env RAFTCRON_TOKEN_FILE or RAFTCRON_TOKEN)",
    )
    parser.add_argument(
        "--client-cert", default=default(None), help="PEM client certificate for mutual TLS (env RAFTCRON_CLIENT_CERT)"
    )
    parser.add_argument("--client-key", default=default(None), help="its PEM private key (env RAFTCRON_CLIENT_KEY)")
    parser.add_argument(
        "--insecure",
        action="store_true",
        default=default(False),
        help="send the token without TLS to a non-loopback address (env RAFTCRON_INSECURE=1)",
    )
