"""``python -m pytest_agentv schema eval|sidecar|targets``: print the JSON Schema of eval files,
of the sidecars of JSONL datasets or of targets files, made from the models the loader validates
with (so it cannot drift from them)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .schema.jsonschema import SCHEMA_KINDS, json_schema


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_agentv", description="pytest-agentv tools"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    schema = commands.add_parser(
        "schema",
        help="print the JSON Schema of eval files, JSONL datasets' sidecars or targets files",
    )
    schema.add_argument("kind", choices=SCHEMA_KINDS)
    args = parser.parse_args(argv)
    json.dump(json_schema(args.kind), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
