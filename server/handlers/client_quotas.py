"""DescribeClientQuotas v0-v1 and AlterClientQuotas v0-v1 (KIP-546; what kafka-configs.sh
--entity-type users/clients/ips uses): the quotas of server/quotas/, made durable before an
alteration is answered. Kafka's errors: INVALID_REQUEST for bad entities, keys, values and
filters, UNSUPPORTED_VERSION for a filter on an unknown entity type."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.client_quotas import AlterClientQuotasResponse, DescribeClientQuotasResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext
from kcoord.server.deferred import of_coroutine
from kcoord.server.quotas.entities import Filter, QuotaError

if TYPE_CHECKING:
    from kcoord.server.quotas.manager import QuotaManager

DEntry = DescribeClientQuotasResponse.EntryData
AEntry = AlterClientQuotasResponse.EntryData


class ClientQuotaApis:
    """The handlers of client_quotas.py, built by the composition root (server/node.py) with the parts they use."""

    def __init__(self, quotas: QuotaManager) -> None:
        self.quotas = quotas

    def handle_describe_client_quotas(self, ctx: RequestContext, req: Any, version: int) -> Any:
        try:
            flt = Filter(((c.entity_type, c.match_type, c.match) for c in req.components), bool(req.strict))
        except QuotaError as e:
            return DescribeClientQuotasResponse(version=version, throttle_time_ms=0, error_code=int(e.code),
                                                error_message=e.message, entries=None)
        entries = [
            DEntry(entity=[DEntry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                   values=[DEntry.ValueData(key=k, value=v) for k, v in sorted(values.items())])
            for entity, values in self.quotas.describe(flt)
        ]
        return DescribeClientQuotasResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                            error_message=None, entries=entries)

    def handle_alter_client_quotas(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return of_coroutine(self._alter_client_quotas(ctx, req, version), "AlterClientQuotas")

    async def _alter_client_quotas(self, ctx: RequestContext, req: Any, version: int) -> Any:
        entries = [([(e.entity_type, e.entity_name) for e in entry.entity],
                    [(op.key, None if op.remove else float(op.value)) for op in entry.ops])
                   for entry in req.entries]
        results = await self.quotas.alter(entries, bool(req.validate_only))
        return AlterClientQuotasResponse(version=version, throttle_time_ms=0, entries=[
            AEntry(error_code=int(code), error_message=message,
                   entity=[AEntry.EntityData(entity_type=t, entity_name=n) for t, n in pairs])
            for pairs, code, message in results])
