"""``python -m kbroker``: the same as the ``kbroker`` command."""

from kbroker.cli import main

main()
