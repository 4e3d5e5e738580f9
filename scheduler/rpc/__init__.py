"""gRPC servicers that translate only: validate, proto -> command, propose or read, result -> proto."""
