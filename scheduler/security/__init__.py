"""Who may call what: bearer tokens with roles, the method policy, TLS credentials, dev credentials."""
