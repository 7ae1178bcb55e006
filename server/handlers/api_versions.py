"""ApiVersions v0-v4: the ranges of protocol/api.API_TABLE (Produce advertised from v0, as Kafka 4
does: protocol/api.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION); v3+ also carry the supported and
finalized features (server/features.py: transaction.version tells clients to use transactions
v2)."""
from __future__ import annotations

from typing import Any

from kafka.protocol.metadata.api_versions import ApiVersionsResponse

from kcoord.protocol.api import API_TABLE
from kcoord.protocol.errors import ErrorCode
from kcoord.server import features
from kcoord.server.context import RequestContext
from kcoord.server.handlers.routes import ROUTES


def api_versions_body(error: ErrorCode, version: int, transaction_version: int | None = None) -> Any:
    extra: dict[str, Any] = {}
    if version >= 3 and transaction_version is not None:
        extra = dict(
            supported_features=[
                ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
                for name, (lo, hi) in features.supported(version).items()],
            finalized_features_epoch=features.FINALIZED_EPOCH,
            finalized_features=[
                ApiVersionsResponse.FinalizedFeatureKey(name=name, min_version_level=level, max_version_level=level)
                for name, level in features.finalized(transaction_version).items()],
        )
    return ApiVersionsResponse(
        version=version,
        error_code=error,
        throttle_time_ms=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(
                api_key=int(s.key), min_version=s.advertised_min_version, max_version=s.max_version
            )
            for s in API_TABLE.values()
            if s.key in ROUTES  # advertise only what is implemented
        ],
        **extra,
    )


class ApiVersionsApi:
    """Built by the composition root (server/node.py) with the one setting it answers from."""

    def __init__(self, transaction_version: int) -> None:
        self.transaction_version = transaction_version

    def handle_api_versions(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return api_versions_body(ErrorCode.NONE, version, self.transaction_version)
