"""`kcoord ctl`: the control API from a shell (each command prints the answer's JSON).

    kcoord ctl [--url URL] status | reset | faults | connections
    kcoord ctl error API ERROR [--count N] [--group G] [--client-id C] [--topic T] [--connection ID]
    kcoord ctl latency MS [--api API] [--group G] [--client-id C] [--topic T] [--connection ID]
    kcoord ctl clear [FAULT_ID]
    kcoord ctl close (--client-id C | --connection ID)
    kcoord ctl stall CLIENT_ID | unstall [CLIENT_ID]
    kcoord ctl record [--max N] [--api API ...] | stop-recording
    kcoord ctl requests [--api API] [--client-id C] [--group G] [--connection ID] [--since SEQ]
    kcoord ctl group GROUP | rebalance GROUP | expire GROUP MEMBER
    kcoord ctl load-in-progress MS (--group G | --partition P)
    kcoord ctl brokers | broker-down NODE | broker-up NODE
    kcoord ctl move-leader TOPIC PARTITION NODE | move-coordinator GROUP NODE

The URL defaults to $KCOORD_CONTROL_URL, else http://127.0.0.1:9405.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from kcoord.server.control.client import ControlClient, ControlError

DEFAULT_URL = "http://127.0.0.1:9405"


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--group", dest="group_id", help="only requests for this group id")
    p.add_argument("--client-id", dest="client_id", help="only requests with this client id")
    p.add_argument("--topic", help="only requests that name this topic")
    p.add_argument("--connection", type=int, help="only requests on this connection (see: connections)")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kcoord ctl", description="Drive a kcoord server's control API "
                                 "(kcoord.control.listener): faults, recording, reset.")
    ap.add_argument("--url", default=os.environ.get("KCOORD_CONTROL_URL", DEFAULT_URL),
                    help=f"the control API (default $KCOORD_CONTROL_URL or {DEFAULT_URL})")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, text in (("status", "the server, its topics, groups and faults"),
                       ("reset", "back to a new server: every topic, group, offset and fault gone"),
                       ("faults", "the injected faults"), ("connections", "the Kafka connections"),
                       ("stop-recording", "stop recording and forget what was recorded")):
        sub.add_parser(name, help=text)
    e = sub.add_parser("error", help="answer the next COUNT requests of API with ERROR")
    e.add_argument("api", help="Kafka's API name (OffsetCommit) or key")
    e.add_argument("error", help="Kafka's error name (NOT_COORDINATOR) or code")
    e.add_argument("--count", type=int, default=1, help="how many requests (-1: all until cleared)")
    e.add_argument("--message", help="the error_message, where the response has one")
    _filters(e)
    lat = sub.add_parser("latency", help="delay matching requests by MS milliseconds")
    lat.add_argument("ms", type=int)
    lat.add_argument("--api", help="only this API")
    _filters(lat)
    c = sub.add_parser("clear", help="remove one fault, or all")
    c.add_argument("fault_id", type=int, nargs="?")
    cl = sub.add_parser("close", help="close connections now")
    cl.add_argument("--client-id", dest="client_id")
    cl.add_argument("--connection", type=int)
    s = sub.add_parser("stall", help="stop reading a client's connections (without closing them)")
    s.add_argument("client_id")
    u = sub.add_parser("unstall", help="read stalled connections again")
    u.add_argument("client_id", nargs="?")
    r = sub.add_parser("record", help="record requests as received")
    r.add_argument("--max", type=int, help="how many to keep (oldest dropped first)")
    r.add_argument("--api", action="append", dest="apis", help="only this API (repeatable)")
    q = sub.add_parser("requests", help="the recorded requests")
    q.add_argument("--api")
    q.add_argument("--since", type=int, help="only after this sequence number")
    _filters(q)
    for name, text in (("group", "a group's state and members"),
                       ("rebalance", "make a group rebalance now")):
        g = sub.add_parser(name, help=text)
        g.add_argument("group")
    x = sub.add_parser("expire", help="expire a member now, as a missed session would")
    x.add_argument("group")
    x.add_argument("member", help="member id or group.instance.id")
    li = sub.add_parser("load-in-progress", help="unload a __consumer_offsets partition and load it MS later")
    li.add_argument("ms", type=int)
    li.add_argument("--group", dest="group_id")
    li.add_argument("--partition", type=int)
    sub.add_parser("brokers", help="the virtual brokers (kcoord.virtual.brokers), or a cluster's live brokers")
    for name, text in (("broker-down", "take a virtual broker down"), ("broker-up", "bring it back")):
        b = sub.add_parser(name, help=text)
        b.add_argument("node", type=int)
    ml = sub.add_parser("move-leader", help="move a partition's leader to another virtual broker, or on a "
                                            "cluster to another node (a preferred-leader election)")
    ml.add_argument("topic")
    ml.add_argument("partition", type=int)
    ml.add_argument("node", type=int)
    ml.add_argument("--timeout-ms", type=int, help="a cluster: how long to wait for the node to lead (30000)")
    mc = sub.add_parser("move-coordinator", help="move a group's coordinator to another virtual broker, or on "
                                                 "a cluster to another node")
    mc.add_argument("group")
    mc.add_argument("node", type=int)
    mc.add_argument("--timeout-ms", type=int, help="a cluster: how long to wait for the node to answer (30000)")
    return ap


def run(ctl: ControlClient, a: argparse.Namespace) -> Any:
    f = {k: getattr(a, k, None) for k in ("group_id", "client_id", "topic", "connection")}
    simple = {"status": ctl.status, "reset": ctl.reset, "faults": ctl.faults, "connections": ctl.connections,
              "stop-recording": ctl.stop_recording}
    if a.cmd in simple:
        return simple[a.cmd]()
    if a.cmd == "error":
        return ctl.inject_error(a.api, a.error, a.count, message=a.message, **f)
    if a.cmd == "latency":
        return ctl.add_latency(a.ms, api=a.api, **f)
    if a.cmd == "clear":
        return ctl.clear_faults() if a.fault_id is None else ctl.remove_fault(a.fault_id)
    if a.cmd == "close":
        return ctl.close_connections(client_id=a.client_id, connection=a.connection)
    if a.cmd == "stall":
        return ctl.stall(a.client_id)
    if a.cmd == "unstall":
        return ctl.unstall(a.client_id)
    if a.cmd == "record":
        return ctl.start_recording(a.max, a.apis)
    if a.cmd == "requests":
        return ctl.requests(api=a.api, since=a.since, client_id=a.client_id, group_id=a.group_id,
                            connection=a.connection)
    if a.cmd == "group":
        return ctl.group(a.group)
    if a.cmd == "rebalance":
        return ctl.rebalance(a.group)
    if a.cmd == "expire":
        return ctl.expire_member(a.group, a.member)
    if a.cmd == "load-in-progress":
        return ctl.load_in_progress(a.ms, group_id=a.group_id, partition=a.partition)
    if a.cmd == "brokers":
        return ctl.brokers()
    if a.cmd == "broker-down":
        return ctl.broker_down(a.node)
    if a.cmd == "broker-up":
        return ctl.broker_up(a.node)
    if a.cmd == "move-leader":
        return ctl.move_leader(a.topic, a.partition, a.node, a.timeout_ms)
    if a.cmd == "move-coordinator":
        return ctl.move_coordinator(a.group, a.node, a.timeout_ms)
    raise AssertionError(a.cmd)


def main(argv: list[str]) -> int:
    a = _parser().parse_args(argv)
    try:
        answer = run(ControlClient(a.url), a)
    except ControlError as e:
        print(f"kcoord ctl: {e}", file=sys.stderr)
        return 1
    print(json.dumps(answer, indent=1))
    return 0
