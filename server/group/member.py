"""Old import path of the classic member (now server/group/classic/member.py)."""
from server.group.classic.member import JoinResult, MemberMetadata, SyncResult  # noqa: F401
