"""A newcomer's first worker: the README's example runs as pasted against a secured cluster, and a
worker whose token may not lease its targets stops with the reason instead of retrying forever."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scheduler.rpc.convert import spec_to_pb
from scheduler.security.principals import ADMIN, WORKER, Principal
from scheduler.specs import load_job_document
from tests.security.principals_cluster import secured_cluster, start_worker

pytestmark = pytest.mark.integration  # with tokens and TLS on, as `raftcron dev` runs

ROOT = Path(__file__).resolve().parents[2]
PRINCIPALS = [
    Principal("admin", ADMIN),
    Principal("worker", WORKER, targets=("demo.*",)),  # what the dev cluster's worker token allows
    Principal("reports-worker", WORKER, targets=("reports.*",)),
]
SUCCESS_LINE = re.compile(r"INFO run demo\.heartbeat@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(attempt 1\): SUCCESS")


def readme_worker_example() -> str:
    """The Python block the README marks as the one its test runs."""
    readme = (ROOT / "README.md").read_text()
    marker = readme.index("<!-- tests/integration/test_worker_first_steps.py runs this block as it stands -->")
    block = re.search(r"```python\n(.*?)```", readme[marker:], re.S)
    assert block is not None
    return block.group(1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = secured_cluster(tmp_path_factory.mktemp("first-steps"), PRINCIPALS)
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        heartbeat = [s for s in load_job_document(ROOT / "examples" / "jobs.yaml").jobs if s.id == "demo.heartbeat"]
        with cluster.client(timeout_s=10) as admin:
            admin.apply_jobs(jobs=[spec_to_pb(spec) for spec in heartbeat])
        yield cluster
    finally:
        cluster.stop()


def wait_for_output(process: subprocess.Popen, log_path: Path, pattern: re.Pattern, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log_path.read_text() if log_path.exists() else ""
        if pattern.search(text) or process.poll() is not None:
            return text
        time.sleep(0.1)
    return log_path.read_text()


def test_the_readme_worker_runs_as_pasted(cluster, tmp_path):
    code = readme_worker_example()
    compile(code, "hello_worker.py", "exec")
    (tmp_path / "hello_worker.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTCRON_")}
    env |= {
        "RAFTCRON_CLUSTER": cluster.cluster_arg,
        "RAFTCRON_CA": cluster.credentials.ca_file,
        "RAFTCRON_TOKEN_FILE": cluster.credentials.token_file("worker"),
        "PYTHONPATH": str(ROOT),  # the SDK as installed; the script's own directory comes first
    }
    log_path = tmp_path / "hello_worker.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "hello_worker.py"], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        output = wait_for_output(process, log_path, SUCCESS_LINE, 60)
        assert SUCCESS_LINE.search(output), output
        assert "leasing demo.echo" in output and ": leased (attempt 1" in output, output
        assert re.search(r"INFO demo\.heartbeat@\S+Z says still alive", output), output
    finally:
        process.send_signal(signal.SIGTERM)  # as Ctrl-C would: drains, then returns from run()
        assert process.wait(60) == 0, log_path.read_text()
    assert "Traceback" not in log_path.read_text()


def test_a_worker_whose_token_may_not_lease_its_targets_exits_with_the_reason(cluster):
    process = start_worker(cluster, "reports-worker", "--demo")
    status = process.wait(60)
    output = (cluster.data_dir / "worker-reports-worker.log").read_text()
    assert status == 2, output
    assert "PERMISSION_DENIED" in output and "reports-worker may lease targets ['reports.*']" in output, output
    assert "Traceback" not in output


def test_a_worker_with_a_token_the_cluster_does_not_know_exits_with_the_reason(cluster, tmp_path):
    bogus = tmp_path / "bogus.token"
    bogus.write_text("not-a-token-of-this-cluster")
    process = start_worker(cluster, "worker", "--demo", env={"RAFTCRON_TOKEN_FILE": str(bogus)})
    status = process.wait(60)
    output = (cluster.data_dir / "worker-worker.log").read_text()
    assert status == 2 and "UNAUTHENTICATED" in output and "Traceback" not in output, output
