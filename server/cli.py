"""`kcoord` command line, shaped like kafka-server-start:

    kcoord serve [server.properties|server.toml] [--override name=value ...]
                 (and KAFKA_<NAME> environment variables: server/config_env.py)
    kcoord compact [server.properties|server.toml] [--override name=value ...] [--master URL]
                   [--output DIR] [--no-verify]
    kcoord sidecar [server.properties|server.toml] [--override name=value ...] [--master URL]
    kcoord dump PATH... [--json]
    kcoord groups|offsets [--log-dir DIR]
    kcoord scram [server.properties] --add-scram 'SCRAM-SHA-256=[name=..,password=..]' [--list]
    kcoord ctl [--url URL] COMMAND ...   (the control API: server/control/cli.py)
    kcoord cluster [-n N] [--zookeeper HOST:PORT[/chroot]] [--dir DIR] [--override name=value ...]
                   N nodes through ZooKeeper (docs/cluster.md); Ctrl-C stops them all
    kcoord topics|configs|consumer-groups|share-groups|acls ...   kafka-topics.sh, kafka-configs.sh,
                    kafka-consumer-groups.sh, kafka-share-groups.sh and kafka-acls.sh, over the wire to any Kafka-protocol server
"""
from __future__ import annotations

import argparse
import os
import sys

from kcoord.server.config import Config

# `kcoord <tool>`: Kafka's command-line tools (server/kafkatools), module by name
TOOLS = {"topics": "topics", "configs": "configs", "consumer-groups": "consumer_groups", "acls": "acls",
         "share-groups": "share_groups"}


def _serve(args: argparse.Namespace) -> int:
    import gc

    from kcoord.server.lazy_imports import defer_package_inits

    # start-up time: no garbage collection while the modules load (it finds nothing to free
    # there; the server turns it back on once it listens), nor kafka-python's and aiokafka's
    # client packages
    gc.disable()
    defer_package_inits()
    from kcoord.server.app import serve

    config = _load(args)
    return 2 if config is None else serve(config)


def _load(args: argparse.Namespace) -> Config | None:
    try:
        return Config.load(args.config, args.override or [], environ=os.environ)
    except (OSError, ValueError) as e:
        print(f"kcoord: {e}", file=sys.stderr)
        return None


def _compact(args: argparse.Namespace) -> int:
    """One compaction pass of __consumer_offsets and the other compacted topics (the PySpark
    sidecar) over the log directory
    the same configuration gives the server; in place (the server may run) unless --output."""
    config = _load(args)
    if config is None:
        return 2
    from kcoord.sidecar.compact import main as compact_main

    argv = [
        str(config.log_dir),
        *(["--output", args.output] if args.output else ["--in-place"]),
        "--master", args.master,
        "--segment-bytes", str(config["offsets.topic.segment.bytes"]),
        "--log-segment-bytes", str(config["log.segment.bytes"]),
        *(["--log-cleanup-policy", config.given["log.cleanup.policy"]] if "log.cleanup.policy" in config.given else []),
        "--delete-retention-ms", str(config["log.cleaner.delete.retention.ms"]),
    ]
    if not args.no_verify:
        argv.append("--verify")
    return compact_main(argv)


def _sidecar(args: argparse.Namespace) -> int:
    config = _load(args)
    if config is None:
        return 2
    import logging

    from kcoord.sidecar.daemon import serve

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return serve(config, args.master)


def _cluster(argv: list[str]) -> int:
    """`kcoord cluster`: N nodes and (unless --zookeeper) a ZooKeeper from Debian's package,
    each in its own directory; prints the ports, runs until Ctrl-C, then stops them all."""
    import signal
    import tempfile
    import time
    from pathlib import Path

    p = argparse.ArgumentParser(prog="kcoord cluster", description="run N kcoord nodes through ZooKeeper")
    p.add_argument("-n", "--nodes", type=int, default=3, help="number of nodes (default 3)")
    p.add_argument("--zookeeper", help="an existing ZooKeeper's connect string (default: start one)")
    p.add_argument("--dir", help="directory of the nodes' (and ZooKeeper's) data (default: a new temporary one)")
    p.add_argument("--base-port", type=int, default=0, help="node i listens on BASE+i (default: free ports)")
    p.add_argument("--session-timeout-ms", type=int, default=18000, help="zookeeper.session.timeout.ms")
    p.add_argument("--override", action="append", default=[], metavar="NAME=VALUE", help="a setting of every node")
    p.add_argument("--control", action="store_true",
                   help="every node serves the control API (its URL printed): kcoord ctl move-coordinator / move-leader")
    args = p.parse_args(argv)
    if args.nodes < 1:
        p.error("--nodes must be at least 1")
    from kcoord.testing.cluster import KcoordCluster

    directory = Path(args.dir or tempfile.mkdtemp(prefix="kcoord-cluster-"))
    overrides = dict(o.split("=", 1) for o in args.override)
    ports = {i: args.base_port + i for i in range(1, args.nodes + 1)} if args.base_port else None
    cluster = KcoordCluster(directory, args.nodes, zookeeper=args.zookeeper, overrides=overrides,
                            session_timeout_ms=args.session_timeout_ms, ports=ports, control=args.control)
    stop = False

    def on_signal(_sig: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        cluster.start()
        print(f"ZooKeeper   {cluster.zookeeper}", flush=True)
        for i, node in sorted(cluster.nodes.items()):
            control = f"   control {node.control_url}" if node.control_url else ""
            print(f"node {i}      {node.bootstrap}   {node.log_dir.parent}{control}", flush=True)
        print(f"bootstrap   {cluster.bootstrap}\n(Ctrl-C stops the cluster)", flush=True)
        while not stop and any(n.alive() for n in cluster.nodes.values()):
            time.sleep(0.2)
    except (OSError, RuntimeError, AssertionError) as e:
        print(f"kcoord cluster: {e}", file=sys.stderr)
        return 1
    finally:
        cluster.close()
    return 0


def _config_args(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The arguments of the commands that read the server's configuration."""
    p.add_argument("config", nargs="?", help="server.properties or .toml file")
    p.add_argument("--override", action="append", metavar="NAME=VALUE", help="override a setting")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "serve":
        # start-up time: the parser of serve alone (every subcommand's costs a few ms more)
        return _serve(_config_args(argparse.ArgumentParser(prog="kcoord serve", description="run the server"))
                      .parse_args(argv[1:]))
    if argv and argv[0] == "dump":
        from kcoord.storage.dump import main as dump_main

        return dump_main(argv[1:])
    if argv and argv[0] == "cluster":
        return _cluster(argv[1:])
    if argv and argv[0] == "ctl":
        from kcoord.server.control.cli import main as ctl_main

        return ctl_main(argv[1:])
    if argv and argv[0] in ("groups", "offsets"):
        from kcoord.server.inspect import main as inspect_main

        return inspect_main(argv)
    if argv and argv[0] == "scram":
        from kcoord.server.security.scram_cli import main as scram_main

        return scram_main(argv[1:])
    if argv and argv[0] in TOOLS:
        import importlib

        return importlib.import_module(f"kcoord.server.kafkatools.{TOOLS[argv[0]]}").main(argv[1:])

    parser = argparse.ArgumentParser(prog="kcoord", description="Kafka-compatible group coordinator")
    sub = parser.add_subparsers(dest="command", required=True)
    _config_args(sub.add_parser("serve", help="run the server", description="run the server"))
    c = _config_args(sub.add_parser("compact", help="compact __consumer_offsets and every cleanup.policy=compact "
                                                    "topic with the PySpark sidecar (one pass)"))
    c.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    c.add_argument("--output", help="write the compacted partitions here instead of in place")
    c.add_argument("--no-verify", action="store_true", help="skip replaying input and output")
    d = _config_args(sub.add_parser("sidecar", help="compact __consumer_offsets and every cleanup.policy=compact "
                                                    "topic continuously, as Kafka's log cleaner"))
    d.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    sub.add_parser("dump", help="decode __consumer_offsets segments: dump PATH... [--json]")
    sub.add_parser("groups", help="groups rebuilt from the log: groups [--log-dir DIR]")
    sub.add_parser("offsets", help="offsets rebuilt from the log: offsets [--log-dir DIR]")
    sub.add_parser("scram", help="SCRAM credentials of a stopped server: scram [server.properties] "
                                 "--add-scram 'SCRAM-SHA-256=[name=..,password=..]' [--list]")
    sub.add_parser("cluster", help="N nodes through ZooKeeper, started together: cluster --help")
    sub.add_parser("ctl", help="drive a running server's control API (faults, recording, reset): ctl --help")
    for tool in TOOLS:
        sub.add_parser(tool, help=f"kafka-{tool}.sh, with its flags, against any Kafka-protocol server")
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "compact":
        return _compact(args)
    if args.command == "sidecar":
        return _sidecar(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
