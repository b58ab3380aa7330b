"""In-process brokers for the transaction coordinator's API tests (the group tests' fixture)."""

from tests.group.conftest import start_broker

__all__ = ["start_broker"]
