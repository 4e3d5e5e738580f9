"""gRPC metadata of the raftcron.v1 contract, which no .proto can declare.

Nodes write these and clients read them, so they live beside the generated messages both sides
already import, not in either side's implementation.
"""

# Trailing metadata of a write whose entry may or may not commit: retry it with the same request id.
OUTCOME_UNKNOWN = ("raftcron-outcome", "unknown")
# Trailing metadata of a worker session a node ends because it is not leading: the leader's gRPC
# address, when the node knows one, so the worker opens its next session there.
LEADER_ADDRESS = "raftcron-leader"
