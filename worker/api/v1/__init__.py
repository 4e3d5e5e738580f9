"""raftcron.v1 gRPC contract: generated code of proto/worker/api/v1/*.proto (scripts/gen_proto.sh),
and the metadata keys no .proto declares (metadata.py)."""
