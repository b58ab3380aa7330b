"""Authentication for the broker: pure state machines, no IO (issue 12)."""
