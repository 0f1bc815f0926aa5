"""The build's one error type, in its own module so executors, the read phase and the CLI can raise
and catch it without importing the builder."""

from __future__ import annotations


class BuildError(RuntimeError):
    """A build could not finish; the message says why and what to do."""
