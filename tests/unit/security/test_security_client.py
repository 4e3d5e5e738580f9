"""Client credentials: from the environment the dev cluster prints, overridden by flags."""

from __future__ import annotations

import pytest

from scheduler import cli
from scheduler.cli.connection import credential_environ
from scheduler.cli.parser import build_parser
from worker import Credentials


def test_credentials_come_from_the_variables_raftcron_dev_prints(tmp_path):
    token_file = tmp_path / "admin.token"
    token_file.write_text("tok-123\n")
    credentials = Credentials.from_env({"RAFTCRON_CA": "/ca.pem", "RAFTCRON_TOKEN_FILE": str(token_file)})
    assert credentials.tls and credentials.ca_file == "/ca.pem"
    assert credentials.metadata() == (("authorization", "Bearer tok-123"),)
    assert "tok-123" not in repr(credentials)


def test_no_variables_no_tls_no_token():
    credentials = Credentials.from_env({})
    assert not credentials.tls and credentials.metadata() == ()


def test_an_unreadable_token_file_is_an_error_not_an_anonymous_client(tmp_path):
    with pytest.raises(ValueError, match="RAFTCRON_TOKEN_FILE"):
        Credentials.from_env({"RAFTCRON_TOKEN_FILE": str(tmp_path / "missing")})


def test_flags_override_the_environment(tmp_path):
    flag_token = tmp_path / "flag.token"
    flag_token.write_text("from-flag")
    args = build_parser().parse_args(["--ca", "/flag-ca.pem", "--token-file", str(flag_token), "status"])
    environ = credential_environ(args, {"RAFTCRON_TOKEN": "from-env", "RAFTCRON_CA": "/env-ca.pem"})
    credentials = Credentials.from_env(environ)
    assert (credentials.ca_file, credentials.token) == ("/flag-ca.pem", "from-flag")


def test_credential_flags_before_worker_reach_the_worker(monkeypatch):
    seen = []
    monkeypatch.setattr("worker.cli.main", lambda argv: seen.append(argv) or 0)
    assert cli.main(["--ca", "/ca.pem", "--token-file", "/w.token", "worker", "--demo"]) == 0
    (argv,) = seen
    assert argv[argv.index("--ca") + 1] == "/ca.pem" and argv[argv.index("--token-file") + 1] == "/w.token"
    assert "--demo" in argv
