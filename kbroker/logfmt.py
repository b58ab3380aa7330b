"""Structured log lines: one line per event, ``time level logger message key=value ...``.

Example:

    2026-11-21 16:05:03,513 DEBUG kbroker.request request api=FETCH version=12 ms=0.41

Fields come from ``extra=fields(name=value, ...)`` on a logging call. A value that is empty or
holds a space, a quote, an equals sign or a control character is written as a JSON string, so
a line splits unambiguously on spaces. An exception's traceback becomes one more field,
``exc="..."`` with its newlines escaped, keeping the event on one line.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

FIELDS_ATTRIBUTE = "kv_fields"
_NEEDS_QUOTES = set(' "=\\') | {chr(c) for c in range(32)}


def fields(**values: Any) -> dict[str, dict[str, Any]]:
    """``extra`` for a logging call carrying ``values`` as key=value fields."""
    return {FIELDS_ATTRIBUTE: values}


def format_value(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    if not text or any(ch in _NEEDS_QUOTES for ch in text):
        return json.dumps(text)
    return text


class KeyValueFormatter(logging.Formatter):
    """Formats the record with ``fmt``, then appends its fields and exception on one line."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record).replace("\n", "\\n")
        extra: dict[str, Any] = dict(getattr(record, FIELDS_ATTRIBUTE, {}))
        if record.exc_info:
            extra["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            extra["stack"] = self.formatStack(record.stack_info)
        if extra:
            line += " " + " ".join(f"{k}={format_value(v)}" for k, v in extra.items())
        return line


def configure(level: str, fmt: str) -> None:
    """Log to stderr at ``level`` with ``fmt`` (a %-style format) plus key=value fields."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter(fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
