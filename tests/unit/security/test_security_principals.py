"""Principals files, token hashing and lookup, and the development credentials."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from scheduler.security.devcerts import ensure_dev_credentials
from scheduler.security.principals import (
    ADMIN,
    SUBMITTER,
    WORKER,
    Authenticator,
    Principal,
    PrincipalsError,
    hash_token,
    parse_principals,
    principals_document,
)


def test_a_token_finds_its_principal_and_nothing_else_does():
    alice, ci = Principal("alice", ADMIN), Principal("ci", SUBMITTER, owners=("finance",))
    authenticator = Authenticator(parse_principals(principals_document([(alice, "tok-alice"), (ci, "tok-ci")])))
    assert authenticator.authenticate("tok-ci") == ci
    assert authenticator.authenticate("tok-alice") == alice
    for wrong in ("", None, "tok-ci ", "TOK-CI", hash_token("tok-ci")):
        assert authenticator.authenticate(wrong) is None


def test_only_hashes_are_written():
    document = principals_document([(Principal("alice", ADMIN), "s3cret-token")])
    assert "s3cret-token" not in yaml.safe_dump(document)
    assert document["principals"][0]["token_sha256"] == hash_token("s3cret-token")


@pytest.mark.parametrize(
    "item, problem",
    [
        ({"name": "a", "role": "root", "token_sha256": "ab" * 32}, "role 'root'"),
        ({"name": "a", "role": "admin", "token_sha256": "abc"}, "token_sha256"),
        ({"name": "a", "role": "submitter", "token_sha256": "ab" * 32}, "needs `owners`"),
        ({"name": "a", "role": "worker", "token_sha256": "ab" * 32}, "needs `targets`"),
        ({"name": "a", "role": "admin", "owners": ["x"], "token_sha256": "ab" * 32}, "owners belong to submitters"),
        ({"name": "a", "role": "admin", "token": "plain", "token_sha256": "ab" * 32}, "unknown keys ['token']"),
    ],
)
def test_a_bad_principal_is_refused_with_the_reason(item, problem):
    with pytest.raises(PrincipalsError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        parse_principals({"principals": [item]})


def test_names_and_tokens_are_unique():
    item = {"name": "a", "role": "admin", "token_sha256": "ab" * 32}
    with pytest.raises(PrincipalsError, match="unique"):
        parse_principals({"principals": [item, dict(item)]})


def test_dev_credentials_are_private_files_that_work_together(tmp_path):
    credentials = ensure_dev_credentials(tmp_path / "credentials")
    directory = credentials.directory
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = sorted(p.name for p in directory.iterdir())
    assert "ca.key" not in files  # the CA key is thrown away
    for path in directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name
    authenticator = Authenticator.from_file(credentials.node_config()["principals_file"])
    roles = {
        role: authenticator.authenticate(open(credentials.token_file(role)).read())
        for role in ("admin", "submitter", "worker")
    }
    assert {role: p.role for role, p in roles.items()} == {"admin": ADMIN, "submitter": SUBMITTER, "worker": WORKER}
    assert roles["worker"].serves("demo.echo") and roles["worker"].serves("shell")
    assert roles["worker"].serves("http:ops")  # `raftcron worker --http` with the dev worker token
    assert roles["submitter"].owns("finance") and not roles["submitter"].owns("someone-else")
    node = x509.load_pem_x509_certificate((directory / "node.pem").read_bytes())
    ca = x509.load_pem_x509_certificate((directory / "ca.pem").read_bytes())
    node.verify_directly_issued_by(ca)
    sans = node.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert len(sans.get_values_for_type(x509.IPAddress)) == 2


def test_dev_credentials_are_kept_across_restarts(tmp_path):
    first = ensure_dev_credentials(tmp_path / "c")
    token = open(first.token_file("admin")).read()
    assert open(ensure_dev_credentials(tmp_path / "c").token_file("admin")).read() == token


def test_http_pages_take_a_bearer_token_of_a_reading_role():
    from scheduler.security.principals import READER, http_authorizer

    pairs = [
        (Principal("a", ADMIN), "ta"),
        (Principal("r", READER), "tr"),
        (Principal("w", WORKER, targets=("*",)), "tw"),
    ]
    authorize = http_authorizer(Authenticator(parse_principals(principals_document(pairs))))
    assert authorize({"authorization": "Bearer tr"}) and authorize({"authorization": "bearer ta"})
    assert not authorize({"authorization": "Bearer tw"})  # workers read nothing
    assert not authorize({"authorization": "Basic tr"}) and not authorize({})


def test_the_dev_worker_gets_the_worker_token_and_the_ca_and_nothing_else(tmp_path):
    from scheduler.cli.dev import demo_worker_env

    credentials = ensure_dev_credentials(tmp_path / "credentials")
    admin_token = open(credentials.token_file("admin")).read()
    caller = {
        "PATH": "/usr/bin",
        "RAFTCRON_TOKEN_FILE": credentials.token_file("admin"),
        "RAFTCRON_TOKEN": admin_token,
        "RAFTCRON_CLUSTER_SECRET": "s3cret",
        "RAFTCRON_LOG_LEVEL": "DEBUG",
    }
    env = demo_worker_env(credentials, tmp_path, caller)
    assert env["PATH"] == "/usr/bin" and env["RAFTCRON_LOG_LEVEL"] == "DEBUG"
    assert {k for k in env if k.startswith("RAFTCRON_")} == {"RAFTCRON_CA", "RAFTCRON_TOKEN_FILE", "RAFTCRON_LOG_LEVEL"}
    assert not any(str(credentials.directory) in value for value in env.values())
    own = Path(env["RAFTCRON_TOKEN_FILE"]).parent
    assert sorted(p.name for p in own.iterdir()) == ["ca.pem", "worker.token"]
    assert stat.S_IMODE(own.stat().st_mode) == 0o700
    authenticator = Authenticator.from_file(credentials.node_config()["principals_file"])
    assert authenticator.authenticate(Path(env["RAFTCRON_TOKEN_FILE"]).read_text()).role == WORKER
