"""Old import path of the classic group (now server/group/classic/group.py)."""
from server.group.classic.group import (  # noqa: F401
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    GroupMetadata,
    parse_subscription_topics,
)
