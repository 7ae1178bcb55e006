"""ApiVersions v0-v4: the ranges of protocol/api.API_TABLE (Produce advertised from v0, as Kafka 4
does: protocol/api.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION)."""
from __future__ import annotations

from typing import Any

from kafka.protocol.metadata import ApiVersionsResponse

from protocol.api import API_TABLE
from protocol.errors import ErrorCode
from server.context import RequestContext
from server.handlers.registry import HANDLERS


def api_versions_body(error: ErrorCode, version: int) -> Any:
    return ApiVersionsResponse(
        version=version,
        error_code=error,
        throttle_time_ms=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(
                api_key=int(s.key), min_version=s.advertised_min_version, max_version=s.max_version
            )
            for s in API_TABLE.values()
            if s.key in HANDLERS  # advertise only what is implemented
        ],
    )


def handle_api_versions(ctx: RequestContext, req: Any, version: int) -> Any:
    return api_versions_body(ErrorCode.NONE, version)
