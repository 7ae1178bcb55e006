"""The kcoord server: asyncio (uvloop) networking, request dispatch, handlers, the group
coordinator and the purgatory."""
