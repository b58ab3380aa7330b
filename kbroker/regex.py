"""Regular expressions as Kafka evaluates them: RE2/J syntax, matched against whole names.

Kafka compiles the patterns clients send (ListTransactions' transactional id pattern,
KIP-1152; consumer group regex subscriptions, KIP-848) with RE2/J, not java.util.regex:
POSIX classes such as ``[[:alpha:]]`` work, backreferences and lookaround do not. The RE2
binding gives the same syntax and linear-time matching, so a hostile pattern cannot stall
the broker. A pattern that does not compile is the client's error (INVALID_REGULAR_EXPRESSION
at the handler boundary).
"""

from __future__ import annotations

import re2

_OPTIONS = re2.Options()
# A bad pattern is reported to the client, not logged by RE2 on stderr.
_OPTIONS.log_errors = False


class InvalidRegex(ValueError):
    """A pattern RE2 does not accept; ``reason`` says why, in RE2's words."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class Regex:
    """A compiled pattern; ``matches`` is true when it matches the whole of ``name``."""

    __slots__ = ("pattern", "_compiled")

    def __init__(self, pattern: str) -> None:
        try:
            self._compiled = re2.compile(pattern, _OPTIONS)
        except re2.error as exc:
            reason = (
                exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            )
            raise InvalidRegex(
                f"invalid regular expression {pattern!r}: {reason}", reason
            ) from None
        self.pattern = pattern

    def matches(self, name: str) -> bool:
        return self._compiled.fullmatch(name) is not None
