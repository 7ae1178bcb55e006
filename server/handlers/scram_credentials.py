"""DescribeUserScramCredentials v0 and AlterUserScramCredentials v0 (what kafka-configs.sh
--describe / --alter --add-config 'SCRAM-SHA-256=[password=...]' --entity-type users uses).
Alterations are made durable before the answer (server/security/credentials.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.users import AlterUserScramCredentialsResponse, DescribeUserScramCredentialsResponse

from kcoord.protocol.errors import ErrorCode, error_code_of
from kcoord.server.context import RequestContext
from kcoord.server.deferred import of_coroutine
from kcoord.server.security import credentials

if TYPE_CHECKING:
    from kcoord.server.security.state import SecurityState

DescribeResult = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
AlterResult = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


class ScramCredentialApis:
    """The handlers of scram_credentials.py, built by the composition root (server/node.py) with the parts they use."""

    def __init__(self, security: SecurityState) -> None:
        self.security = security

    def handle_describe_user_scram_credentials(self, ctx: RequestContext, req: Any, version: int) -> Any:
        users = None if req.users is None else [u.name for u in req.users]
        results = [
            DescribeResult(user=name, error_code=code, error_message=message, credential_infos=[
                DescribeResult.CredentialInfo(mechanism=mech, iterations=iterations) for mech, iterations in infos])
            for name, code, message, infos in credentials.describe(self.security.credentials.state, users)
        ]
        return DescribeUserScramCredentialsResponse(version=version, throttle_time_ms=0, error_code=0,
                                                    error_message=None, results=results)

    def handle_alter_user_scram_credentials(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return of_coroutine(self._alter_user_scram_credentials(ctx, req, version), "AlterUserScramCredentials")

    async def _alter_user_scram_credentials(self, ctx: RequestContext, req: Any, version: int) -> Any:
        store = self.security.credentials
        async with store.lock:  # validate and write one request at a time
            records, results = credentials.alter(store.state, req)
            try:
                await store.commit(records)
            except OSError as e:  # nothing was applied
                code = error_code_of(e)
                results = [(name, code if err == ErrorCode.NONE else err, msg if err != ErrorCode.NONE else str(e))
                           for name, err, msg in results]
        return AlterUserScramCredentialsResponse(version=version, throttle_time_ms=0, results=[
            AlterResult(user=name, error_code=code, error_message=msg) for name, code, msg in results])
