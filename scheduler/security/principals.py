"""Principals: who a bearer token belongs to, with a role and a scope. Tokens are kept hashed.

The principals file is YAML, readable by the node user only:

    principals:
      - {name: alice, role: admin, token_sha256: 9f86d0...}
      - {name: finance-ci, role: submitter, owners: [finance], targets: ["handler:reports.*", "shell:finance"], token_sha256: ...}
      - {name: report-workers, role: worker, targets: ["reports.*", "shell:finance"], token_sha256: ...}
      - {name: grafana, role: reader, owners: ["*"], token_sha256: ...}

`raftcron token hash` (or `sha256sum`) turns a token into its hash. Owners and targets are
shell-style patterns (`reports.*`, `*`). A submitter's targets are canonical target names
(`handler:NAME`, `shell:OWNER`; see policy.canonical_target); a worker's are the names it
leases (a handler name, `shell:OWNER`, or `shell` for every owner's shell jobs). A reader's or
submitter's owners also say whose payloads and output tails it may read.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import yaml

ADMIN = "admin"  # everything, including kill switches and membership
SUBMITTER = "submitter"  # changes jobs of its owners on its targets; reads (details: its owners')
WORKER = "worker"  # leases, heartbeats and completes runs of its targets
READER = "reader"  # reads only (payloads and output tails: of its owners)
ROLES = (ADMIN, SUBMITTER, WORKER, READER)
# A worker's legacy target name for shell jobs: every owner's (`shell:OWNER` names one owner's).
SHELL = "shell"
SHELL_PREFIX = "shell:"
# HTTP jobs are named like shell jobs, by owner: `http:OWNER`; `http` is every owner's.
HTTP = "http"
HTTP_PREFIX = "http:"
# Leases are recorded as held by "PRINCIPAL/WORKER_ID", so a name may not contain it.
HOLDER_SEPARATOR = "/"


class PrincipalsError(ValueError):
    """A principals file that must not be used."""


@dataclass(frozen=True)
class Principal:
    name: str
    role: str
    owners: tuple[str, ...] = ()  # submitter: job owners it may change; submitter, reader: whose details it reads
    targets: tuple[str, ...] = ()  # worker: run targets it may lease; submitter: targets its jobs may use

    def owns(self, owner: str) -> bool:
        return self.role == ADMIN or any(fnmatchcase(owner, pattern) for pattern in self.owners)

    def serves(self, target: str) -> bool:
        """May this worker lease `target` (a handler name, `shell:OWNER`, or `shell`)?"""
        if self.role == ADMIN:
            return True
        # `shell` in a worker's targets predates per-owner shell names: it still means every owner's;
        # `http` the same for HTTP jobs.
        kind = next((k for k in (SHELL, HTTP) if target == k or target.startswith(k + ":")), None)
        return any(fnmatchcase(target, pattern) or (kind is not None and pattern == kind) for pattern in self.targets)

    @property
    def serves_every_target(self) -> bool:
        return self.role == ADMIN or "*" in self.targets


def hash_token(token: str) -> str:
    """The hex SHA-256 kept at rest. Tokens are random (256 bits), so a fast hash is enough."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)


class Authenticator:
    """Bearer token -> Principal. Loaded once per node; shared by gRPC and the dashboard.

    authenticator = Authenticator.from_file(config.principals_file)
    principal = authenticator.authenticate(token)    # None: unknown token
    """

    def __init__(self, entries: list[tuple[str, Principal]]) -> None:
        self._entries = [(bytes.fromhex(digest), principal) for digest, principal in entries]

    @classmethod
    def from_file(cls, path: str | Path) -> Authenticator:
        try:
            doc = yaml.safe_load(Path(path).read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise PrincipalsError(f"cannot read the principals file {str(path)!r}: {exc}") from None
        return cls(parse_principals(doc, str(path)))

    def authenticate(self, bearer_token: str | None) -> Principal | None:
        if not bearer_token:
            return None
        presented = hashlib.sha256(bearer_token.encode()).digest()
        found = None
        # Every entry is compared, in constant time each, so timing says nothing about which matched.
        for digest, principal in self._entries:
            if hmac.compare_digest(presented, digest) and found is None:
                found = principal
        return found

    @property
    def principals(self) -> tuple[Principal, ...]:
        return tuple(principal for _, principal in self._entries)


def parse_principals(doc, source: str = "principals") -> list[tuple[str, Principal]]:
    """(token hash, principal) pairs from the YAML document; every problem at once."""
    items = doc.get("principals") if isinstance(doc, dict) else None
    if not isinstance(items, list) or not items:
        raise PrincipalsError(f"{source}: expected a mapping with a non-empty list `principals`")
    problems, entries, names, digests = [], [], set(), set()
    for i, item in enumerate(items):
        where = f"{source}: principal #{i + 1}"
        if not isinstance(item, dict):
            problems.append(f"{where}: expected a mapping")
            continue
        name, role, digest = item.get("name"), item.get("role"), str(item.get("token_sha256", "")).lower()
        where = f"{source}: principal {name!r}" if name else where
        unknown = set(item) - {"name", "role", "token_sha256", "owners", "targets"}
        owners, targets = item.get("owners") or [], item.get("targets") or []
        if unknown:
            problems.append(f"{where}: unknown keys {sorted(unknown)}")
        if not isinstance(name, str) or not name or name in names:
            problems.append(f"{where}: needs a unique non-empty name")
        if role not in ROLES:
            problems.append(f"{where}: role {role!r} is not one of {', '.join(ROLES)}")
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest) or digest in digests:
            problems.append(f"{where}: token_sha256 must be a unique hex SHA-256 (64 characters)")
        if not (isinstance(owners, list) and isinstance(targets, list)):
            problems.append(f"{where}: owners and targets are lists")
            continue
        if isinstance(name, str) and HOLDER_SEPARATOR in name:
            problems.append(
                f"{where}: a name may not contain {HOLDER_SEPARATOR!r} (it qualifies the worker ids of leases)"
            )
        if role == SUBMITTER and not owners:
            problems.append(f"{where}: a submitter needs `owners` (the job owners it may change)")
        if role == WORKER and not targets:
            problems.append(f"{where}: a worker needs `targets` (the run targets it may lease)")
        if (owners and role not in (SUBMITTER, READER, None)) or (targets and role not in (SUBMITTER, WORKER, None)):
            problems.append(f"{where}: owners belong to submitters and readers, targets to submitters and workers")
        names.add(name)
        digests.add(digest)
        entries.append((digest, Principal(str(name), str(role), tuple(map(str, owners)), tuple(map(str, targets)))))
    if problems:
        raise PrincipalsError("\n".join(problems))
    return entries


def principals_document(principals: list[tuple[Principal, str]]) -> dict:
    """The YAML document for (principal, token) pairs; only the hashes are written."""
    items = []
    for principal, token in principals:
        item = {"name": principal.name, "role": principal.role, "token_sha256": hash_token(token)}
        if principal.owners:
            item["owners"] = list(principal.owners)
        if principal.targets:
            item["targets"] = list(principal.targets)
        items.append(item)
    return {"principals": items}


def authenticator_for(config) -> Authenticator | None:
    """The node's authenticator (a NodeConfig with `principals_file`); None when tokens are off."""
    return Authenticator.from_file(config.principals_file) if config.principals_file else None


def http_authorizer(authenticator: Authenticator, roles: tuple[str, ...] = (ADMIN, SUBMITTER, READER)):
    """`authorize(headers) -> Principal | None` for HTTP pages (the dashboard): the principal of a
    bearer token of a role that may read (its owners scope what it sees), else None. Headers are
    a mapping with lowercase names."""

    def authorize(headers) -> Principal | None:
        value = headers.get("authorization", "")
        scheme, _, token = value.partition(" ")
        principal = authenticator.authenticate(token.strip()) if scheme.lower() == "bearer" else None
        return principal if principal is not None and principal.role in roles else None

    return authorize
