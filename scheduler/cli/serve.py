"""`raftcron serve` (one node), `raftcron credentials` and `raftcron worker`: the processes of a cluster."""

from __future__ import annotations

import os
from pathlib import Path

from scheduler.cli.connection import CREDENTIAL_FLAGS


def cmd_serve(args) -> int:
    import logging

    from scheduler.config import ConfigError, insecure_warning, load_node_config, serving_refusal, with_generated_secret
    from scheduler.logs import configure_logging
    from scheduler.node import serve

    config = load_node_config(args)
    configure_logging(config.log_level, config.log_format, config.node_id)
    log = logging.getLogger("raftcron.node")
    config, generated = with_generated_secret(config)
    if generated is not None:
        log.info("cluster secret: %s (this one-node loopback cluster's own, 0600)", generated)
    if refusal := serving_refusal(config):
        raise ConfigError(refusal)
    if config.insecure:
        log.warning(insecure_warning(config))
    return serve(config)


def cmd_credentials(args) -> int:
    from scheduler.security.devcerts import ensure_dev_credentials

    directory = Path(args.directory).resolve()
    existed = (directory / "principals.yaml").exists()
    credentials = ensure_dev_credentials(directory, tuple(args.host))
    print(f"{'kept the' if existed else 'created'} credentials in {directory} (files 0600, directory 0700):")
    for name in sorted(p.name for p in directory.iterdir() if p.name != ".gitignore"):
        print(f"  {name}")
    print("a client (CLI or worker) needs:")
    for key, value in credentials.client_env("admin").items():
        if "CLIENT" not in key:
            print(f"{key}={value}")
    return 0


def cmd_worker(args) -> int:
    from worker.cli import main as worker_main

    worker_args = list(args.worker_args)
    if "--cluster" not in worker_args and os.environ.get("RAFTCRON_CLUSTER") is None:
        worker_args = ["--cluster", args.cluster, *worker_args]
    # Credential flags given before `worker` reach the worker as the variables they stand for.
    for flag, name in CREDENTIAL_FLAGS:
        if getattr(args, flag, None):
            worker_args = [f"--{flag.replace('_', '-')}", getattr(args, flag), *worker_args]
    if getattr(args, "insecure", False):
        worker_args = ["--insecure", *worker_args]
    return worker_main(worker_args)
