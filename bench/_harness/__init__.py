"""What the benchmarks share; nothing here is a benchmark (those are the modules of `bench/`).

- `common`: statistics, the table printer, JSON under bench/out/, machine facts, the journal
  mode, free loopback ports, node-log scanning, clean shutdown on SIGTERM.
- `report`: the shared options, the JSON report, the log line, and how a benchmark ends.
- `cluster`: a checked LocalCluster (`bench_cluster`), chunked ApplyJobs, paginated ListRuns.
- `poller`: a Status poller mapping a log index to the time the polled node applied it.
- `metrics`: counters and histograms scraped from a node's /metrics.
- `fleet`: worker processes started and always stopped; `benchworker` is the process itself.
- `rawraft`: bare pysyncobj members, configured like a node's Raft log.
- `grpc_echo`: a trivial gRPC server and blocking clients, each in its own process.
"""
