"""The `raftcron` command line: `parser` builds and runs it; a module per group of commands does the work."""

from scheduler.cli.parser import main

__all__ = ["main"]
