"""When a client may send its bearer token without TLS: the pure decision, as a table."""

from __future__ import annotations

import pytest

from worker._client import ALLOW, REFUSE, WARN, Credentials, PlaintextTokenRefused, plaintext_decision


@pytest.mark.parametrize(
    ("address", "tls", "has_token", "allow_plaintext", "expected"),
    [
        ("10.0.0.1:7200", True, True, False, ALLOW),  # TLS: the token is encrypted
        ("10.0.0.1:7200", False, False, False, ALLOW),  # no token: nothing to disclose
        ("10.0.0.1:7200", False, True, False, REFUSE),
        ("10.0.0.1:7200", False, True, True, ALLOW),  # said so explicitly
        ("node1.example:7200", False, True, False, REFUSE),  # a name may resolve anywhere
        ("127.0.0.1:7200", False, True, False, WARN),
        ("127.0.0.3:7200", False, True, False, WARN),
        ("localhost:7200", False, True, False, WARN),
        ("[::1]:7200", False, True, False, WARN),
        ("[2001:db8::1]:7200", False, True, False, REFUSE),
        ("0.0.0.0:7200", False, True, False, REFUSE),
    ],
)
def test_the_token_goes_in_plaintext_only_to_loopback_or_when_allowed(
    address, tls, has_token, allow_plaintext, expected
):
    assert plaintext_decision(address, tls, has_token, allow_plaintext) == expected


def test_the_refusal_names_the_address_and_what_to_configure():
    with pytest.raises(PlaintextTokenRefused) as refused:
        Credentials(token="t").check_address("10.255.255.1:7200")
    message = str(refused.value)
    assert "10.255.255.1:7200" in message and "RAFTCRON_CA" in message and "RAFTCRON_INSECURE=1" in message


def test_raftcron_insecure_allows_plaintext():
    assert Credentials.from_env({"RAFTCRON_INSECURE": "1"}).allow_plaintext
    assert not Credentials.from_env({"RAFTCRON_INSECURE": "0"}).allow_plaintext
    assert not Credentials.from_env({}).allow_plaintext


def test_insecure_flag_reaches_the_credentials():
    from scheduler.cli.connection import credential_environ
    from scheduler.cli.parser import build_parser

    args = build_parser().parse_args(["--insecure", "status"])
    assert Credentials.from_env(credential_environ(args, {})).allow_plaintext
    args = build_parser().parse_args(["status"])
    assert not Credentials.from_env(credential_environ(args, {})).allow_plaintext


def test_insecure_before_worker_reaches_the_worker(monkeypatch):
    from scheduler import cli

    seen = []
    monkeypatch.setattr("worker.cli.main", lambda argv: seen.append(argv) or 0)
    assert cli.main(["--insecure", "worker", "--demo"]) == 0
    assert "--insecure" in seen[0]


def test_loopback_warns_once_per_address(caplog):
    credentials = Credentials(token="t")
    with caplog.at_level("WARNING", logger="raftcron.client"):
        for _ in range(3):
            credentials.check_address("127.0.0.77:7200")
    assert sum("127.0.0.77:7200" in r.getMessage() for r in caplog.records) == 1
