"""The raftcron node: pure core, Raft adapter, leader loops, gRPC translators and the CLI."""
