"""Heartbeats per second from 100 connections: kcoord vs a bare uvloop server answering the
same frames (the ceiling), measured in the same run. Target: kcoord >= 50% of the ceiling.

Each connection belongs to a member of its own group (joined and synced first), and keeps
exactly one Heartbeat v4 outstanding.
"""
from __future__ import annotations

from _util import SyncClient, closed_loop_args, compare, encode_request, start_bare, start_kcoord, stop
from kafka.protocol.consumer import HeartbeatRequest, JoinGroupRequest, SyncGroupRequest

from kcoord.protocol.errors import ErrorCode


def join(port: int, group: str) -> tuple[str, int]:
    c = SyncClient(port)
    proto = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]

    def join_req(member_id: str) -> JoinGroupRequest:
        return JoinGroupRequest(
            group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000,
            member_id=member_id, group_instance_id=None, protocol_type="consumer", protocols=proto,
        )

    r = c.call(join_req(""), 5)
    if r.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        r = c.call(join_req(r.member_id), 5)
    assert r.error_code == 0, r
    s = c.call(
        SyncGroupRequest(group_id=group, generation_id=r.generation_id, member_id=r.member_id,
                         group_instance_id=None, protocol_type="consumer", protocol_name="range",
                         assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=r.member_id, assignment=b"")]),
        5,
    )
    assert s.error_code == 0, s
    c.close()
    return r.member_id, r.generation_id


def main() -> None:
    ap = closed_loop_args()
    args = ap.parse_args()

    proc, port, _ = start_kcoord()
    bare, bare_port = start_bare("echo")
    try:
        frames = []
        for i in range(args.connections):
            group = f"bench-hb-{i}"
            member, gen = join(port, group)
            req = HeartbeatRequest(group_id=group, generation_id=gen, member_id=member, group_instance_id=None)
            frames.append(encode_request(req, 4, correlation_id=i))
        compare("Heartbeat v4", "heartbeats", port, bare_port, "bare uvloop (ceiling)", frames,
                args.seconds, args.rounds)
    finally:
        stop(proc)
        stop(bare)

if __name__ == "__main__":
    main()
