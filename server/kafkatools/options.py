"""Command-line parsing shaped like the Java tools' (joptsimple): `--name value` or
`--name=value`, repeatable options, unambiguous abbreviations, and Kafka's CommandLineUtils
answers to misuse (the message and the usage on stderr, exit code 1)."""
from __future__ import annotations

import argparse
import signal
import sys
from typing import Any, NoReturn


class ToolParser(argparse.ArgumentParser):
    def __init__(self, prog: str, description: str) -> None:
        super().__init__(prog=prog, description=description, add_help=False, allow_abbrev=True)
        self.add_argument("--help", action="store_true", help="Print usage information.")
        self.add_argument("--version", action="store_true", help="Display Kafka version.")

    def error(self, message: str) -> NoReturn:  # joptsimple's OptionException
        self.usage_exit(message)

    def usage_exit(self, message: str) -> NoReturn:
        """CommandLineUtils.printUsageAndExit."""
        print(message, file=sys.stderr)
        self.print_help(sys.stderr)
        sys.exit(1)

    def parse(self, argv: list[str], what: str) -> argparse.Namespace:
        """Parse; with no arguments or --help print the usage (exit 1 / 0), as Kafka's tools."""
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the tool quietly, as the JVM's does
        if not argv:
            self.usage_exit(what)
        opts = self.parse_args(argv)
        if opts.help:
            print(what)
            self.print_help(sys.stdout)
            sys.exit(0)
        if opts.version:
            from kcoord.server.kafkatools import KAFKA_VERSION

            print(KAFKA_VERSION)
            sys.exit(0)
        return opts


def opt(name: str) -> str:
    """An option as joptsimple prints it in messages: `[name]`."""
    return f"[{name}]"


def check_invalid(parser: ToolParser, opts: Any, used: str, invalid: list[str]) -> None:
    """CommandLineUtils.checkInvalidArgs."""
    if given(opts, used):
        for other in invalid:
            if given(opts, other):
                parser.usage_exit(f'Option "{opt(used)}" can\'t be used with option "{opt(other)}"')


def check_required(parser: ToolParser, opts: Any, *names: str) -> None:
    for name in names:
        if not given(opts, name):
            parser.usage_exit(f'Missing required argument "{opt(name)}"')


def given(opts: Any, name: str) -> bool:
    value = getattr(opts, name.replace("-", "_"))
    return value not in (None, False, [])


def load_properties(path: str) -> dict[str, str]:
    from kcoord.server.config import parse_properties

    with open(path) as f:
        return parse_properties(f.read())
