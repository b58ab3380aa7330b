"""Compatibility suite: stock Kafka clients against a running broker.

A package so that tests/integration and bench/ can reuse `compat_tests.broker_process`.
"""
