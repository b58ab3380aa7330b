"""Command line: `python -m wire.codegen [SPEC_DIR] [--out DIR]`.

Regenerates wire/messages/ from Kafka's JSON message specs (default: the copy in
../shared/kafka-protocol-4.3/message next to the repository).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from wire.codegen import DEFAULT_SPEC_DIR, MESSAGES_DIR, generate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wire.codegen", description=__doc__)
    parser.add_argument("spec_dir", nargs="?", type=Path, default=DEFAULT_SPEC_DIR)
    parser.add_argument("--out", type=Path, default=MESSAGES_DIR)
    args = parser.parse_args(argv)
    written = generate(args.spec_dir, args.out)
    print(f"wrote {len(written)} modules to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
