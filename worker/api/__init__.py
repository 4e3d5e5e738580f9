"""Versioned gRPC API of raftcron: the generated code of the contract in proto/worker/api/."""
