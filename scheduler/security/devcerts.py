"""Credentials for a development cluster on this machine: a private CA, one node certificate
(serves gRPC and presents itself when a node forwards a call), a client certificate, and tokens
for an admin, a submitter, the demo worker and a reader (`raftcron credentials DIR --host ...`
makes the same set for a small deployment such as docker-compose.yml). Loopback is shared by every user of a machine,
so `raftcron dev` secures it like a real cluster. Every file is 0600 in a 0700 directory;
the CA's key is thrown away once the certificates are signed.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from scheduler.security.principals import (
    ADMIN,
    READER,
    SUBMITTER,
    WORKER,
    Principal,
    new_token,
    principals_document,
)

VALIDITY = datetime.timedelta(days=365)
# The owners of examples/jobs.yaml, and the targets the demo worker runs (and `raftcron worker
# --http` with its token: every owner's HTTP jobs). The submitter may use every handler but no
# shell command or HTTP request (examples/jobs.yaml's shell job is applied as the admin);
# the reader sees statuses and times, not payloads or output tails (it has no owners).
DEV_SUBMITTER = Principal("dev-submitter", SUBMITTER, owners=("analytics", "finance", "ops"), targets=("handler:*",))
DEV_WORKER = Principal("dev-worker", WORKER, targets=("demo.*", "reports.build", "payroll.run", "shell", "http"))
DEV_ADMIN = Principal("dev-admin", ADMIN)
DEV_READER = Principal("dev-reader", READER)  # health checks, dashboards
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class DevCredentials:
    directory: Path

    def path(self, name: str) -> str:
        return str(self.directory / name)

    @property
    def ca_file(self) -> str:
        return self.path("ca.pem")

    def token_file(self, role: str) -> str:
        return self.path(f"{role}.token")

    def node_config(self) -> dict:
        """Keys for a node's YAML config: TLS with this CA, tokens of the principals file."""
        return {
            "tls": {"cert_file": self.path("node.pem"), "key_file": self.path("node.key"), "ca_file": self.ca_file},
            "principals_file": self.path("principals.yaml"),
        }

    def client_env(self, role: str = ADMIN) -> dict[str, str]:
        """What a CLI or worker needs (the client certificate only matters with tls client_auth)."""
        return {
            "RAFTCRON_CA": self.ca_file,
            "RAFTCRON_TOKEN_FILE": self.token_file(role),
            "RAFTCRON_CLIENT_CERT": self.path("client.pem"),
            "RAFTCRON_CLIENT_KEY": self.path("client.key"),
        }


def worker_credentials(credentials: DevCredentials, directory: Path) -> dict[str, str]:
    """A directory of the dev worker's own holding only what it needs, the CA and the worker
    token, and the variables that name them. The worker runs shell jobs: pointed at the whole
    credentials directory, a command found the admin token beside its own."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    for source, name in ((credentials.ca_file, "ca.pem"), (credentials.token_file(WORKER), "worker.token")):
        _write(directory / name, Path(source).read_bytes())
    return {"RAFTCRON_CA": str(directory / "ca.pem"), "RAFTCRON_TOKEN_FILE": str(directory / "worker.token")}


def ensure_dev_credentials(directory: Path, hosts: tuple[str, ...] = ()) -> DevCredentials:
    """Create the credentials in `directory` unless they are there already; return where they are.
    The node certificate names loopback and `hosts` (the names clients dial)."""
    directory = Path(directory)
    credentials = DevCredentials(directory)
    if (directory / "principals.yaml").exists():
        return credentials
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "raftcron dev CA")])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key(), now)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write(directory / "ca.pem", ca_cert.public_bytes(serialization.Encoding.PEM))
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    names = tuple(dict.fromkeys((*LOOPBACK_HOSTS, *hosts)))
    _issue(directory, "node", "raftcron dev node", names, usages, ca_cert, ca_key, now)
    _issue(directory, "client", "raftcron dev client", (), [ExtendedKeyUsageOID.CLIENT_AUTH], ca_cert, ca_key, now)
    tokens = []
    for principal in (DEV_ADMIN, DEV_SUBMITTER, DEV_WORKER, DEV_READER):
        token = new_token()
        _write(directory / f"{principal.role}.token", token.encode())
        tokens.append((principal, token))
    _write(directory / "principals.yaml", yaml.safe_dump(principals_document(tokens), sort_keys=False).encode())
    return credentials


def _builder(subject: x509.Name, issuer: x509.Name, public_key, now: datetime.datetime) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
    )


def _issue(directory: Path, stem: str, common_name: str, hosts, usages, ca_cert, ca_key, now) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = _builder(subject, ca_cert.subject, key.public_key(), now).add_extension(
        x509.ExtendedKeyUsage(usages), critical=False
    )
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write(directory / f"{stem}.pem", cert.public_bytes(serialization.Encoding.PEM))
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _write(directory / f"{stem}.key", key_pem)


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _write(path: Path, data: bytes) -> None:
    """Created 0600 from the start (never readable by others, not even briefly)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)
