"""The control API's routes: method and path -> a ControlPlane operation, with the request's
JSON checked on the way in. Every route is declared once, in ROUTES; docs/testing.md
("The control API") documents them.

    GET    /status                                     the server, its faults, topics, groups
    POST   /reset                                      back to a new server (no restart)
    POST   /faults/errors        {api, error, count?, group_id?, client_id?, topic?, connection?, message?}
    POST   /faults/latency       {ms, api?, group_id?, client_id?, topic?, connection?}
    GET    /faults                                     every injected fault
    DELETE /faults                                     remove them all
    DELETE /faults/{id}                                remove one
    GET    /connections                                id, peer, listener port, client id, stalled
    POST   /connections/close    {client_id | connection}
    POST   /connections/stall    {client_id}           stop reading them (and its new ones)
    POST   /connections/unstall  {client_id?}          read them again
    POST   /recording            {max?, apis?}         start recording requests (clears)
    DELETE /recording                                  stop and forget
    GET    /requests?api=&client_id=&group_id=&connection=&since=
    GET    /groups/{group}
    POST   /groups/{group}/rebalance
    POST   /groups/{group}/members/{member}/expire     member id or group.instance.id
    POST   /coordinator/load-in-progress {group_id | partition, ms}
    GET    /brokers                                    virtual brokers: nodes, endpoints, up or down
    POST   /brokers/{node}/down | /brokers/{node}/up
    POST   /partitions/{topic}/{partition}/leader {node}
    POST   /groups/{group}/coordinator {node}          moves the group's __consumer_offsets partition
"""
from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from kcoord.server.control.faults import BadRule
from kcoord.server.control.http import HttpError
from kcoord.server.control.plane import ControlPlane
from kcoord.server.control.refusals import NotFound, Refused

Route = Callable[[ControlPlane, dict[str, str], dict[str, str], dict[str, Any]], Any]

ROUTES: list[tuple[str, str, Route]] = [
    ("GET", "/status", lambda c, p, q, b: c.status()),
    ("POST", "/reset", lambda c, p, q, b: c.reset()),
    ("POST", "/faults/errors", lambda c, p, q, b: c.inject_error(b)),
    ("POST", "/faults/latency", lambda c, p, q, b: c.add_latency(b)),
    ("GET", "/faults", lambda c, p, q, b: {"faults": c.faults()}),
    ("DELETE", "/faults", lambda c, p, q, b: c.clear_faults()),
    ("DELETE", "/faults/{id:int}", lambda c, p, q, b: c.remove_fault(int(p["id"]))),
    ("GET", "/connections", lambda c, p, q, b: {"connections": c.connections()}),
    ("POST", "/connections/close", lambda c, p, q, b: c.close_connections(b)),
    ("POST", "/connections/stall", lambda c, p, q, b: c.stall(b)),
    ("POST", "/connections/unstall", lambda c, p, q, b: c.unstall(_opt_str(b, "client_id"))),
    ("POST", "/recording", lambda c, p, q, b: c.record(b)),
    ("DELETE", "/recording", lambda c, p, q, b: c.stop_recording()),
    ("GET", "/requests", lambda c, p, q, b: c.requests(q)),
    ("GET", "/groups/{group}", lambda c, p, q, b: c.group(p["group"])),
    ("POST", "/groups/{group}/rebalance", lambda c, p, q, b: c.rebalance(p["group"])),
    ("POST", "/groups/{group}/members/{member}/expire", lambda c, p, q, b: c.expire(p["group"], p["member"])),
    ("POST", "/coordinator/load-in-progress", lambda c, p, q, b: c.load_in_progress(b)),
    ("GET", "/brokers", lambda c, p, q, b: c.brokers()),
    ("POST", "/brokers/{node}/down", lambda c, p, q, b: c.broker_down(p["node"])),
    ("POST", "/brokers/{node}/up", lambda c, p, q, b: c.broker_up(p["node"])),
    ("POST", "/partitions/{topic}/{partition}/leader", lambda c, p, q, b: c.move_leader(p["topic"], p["partition"], b)),
    ("POST", "/groups/{group}/coordinator", lambda c, p, q, b: c.move_coordinator(p["group"], b)),
]


def _opt_str(body: dict[str, Any], key: str) -> str | None:
    v = body.get(key)
    if v is not None and not isinstance(v, str):
        raise BadRule(f"'{key}' must be a string")
    return v


# a path as segments: a literal, or (name, digits only) for a {name} / {name:int} part
_Segment = str | tuple[str, bool]


def _compile(path: str) -> list[_Segment]:
    out: list[_Segment] = []
    for seg in path.strip("/").split("/"):
        m = re.fullmatch(r"\{(\w+)(:int)?\}", seg)
        out.append((m.group(1), bool(m.group(2))) if m else seg)
    return out


_COMPILED = [(method, _compile(path), fn) for method, path, fn in ROUTES]


def make_handler(plane: ControlPlane) -> Callable[..., Awaitable[tuple[int, Any]]]:
    async def handle(method: str, segments: list[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        # matched on the decoded segments, so a group id may hold any character, '/' too when
        # percent-encoded
        allowed = []
        for m, pattern, fn in _COMPILED:
            match = _match(pattern, segments)
            if match is None:
                continue
            if m != method:
                allowed.append(m)
                continue
            if body is None:
                body = {}
            if not isinstance(body, dict):
                raise HttpError(400, "the body must be a JSON object")
            try:
                answer = fn(plane, match, query, body)
                if hasattr(answer, "__await__"):
                    answer = await answer
            except BadRule as e:
                raise HttpError(400, str(e)) from None
            except NotFound as e:
                raise HttpError(404, str(e)) from None
            except Refused as e:
                raise HttpError(e.status, str(e)) from None
            return 200, answer
        if allowed:
            raise HttpError(405, f"use {' or '.join(sorted(set(allowed)))} for /{'/'.join(segments)}")
        raise HttpError(404, f"no control route /{'/'.join(segments)} (GET /status; docs/testing.md: The control API)")

    return handle


def _match(pattern: list[_Segment], segments: list[str]) -> dict[str, str] | None:
    """The path's parameters if the (percent-decoded) segments fit the pattern: a decoded '/'
    stays inside its segment, so a group id may hold any character."""
    if len(pattern) != len(segments):
        return None
    out: dict[str, str] = {}
    for want, seg in zip(pattern, segments, strict=True):
        if isinstance(want, str):
            if want != seg:
                return None
        elif want[1] and not seg.isdigit():
            return None
        else:
            out[want[0]] = seg
    return out
