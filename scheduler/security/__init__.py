"""Who may call what: bearer tokens with roles, the method policy, TLS credentials, dev credentials;
and caller text made harmless where it is stored and shown (safetext)."""
