"""Authorization around a handler, as Kafka's KafkaApis does it: each API's route names its
policy (server/handlers/routes.py, the `policy` of its declaration; the policies live in
server/security/policies/, one module per family of APIs), and the dispatcher puts the policy
in front of the handler when an authorizer is configured. Without one nothing here runs: the
routes are the plain handlers, and the hot Heartbeat / OffsetCommit paths stay direct.

A policy sees the request before its handler and says one of three things (a Guarded):
- `refusal`: the whole request is refused; this response is the answer (e.g. a JoinGroup for
  a group the principal may not READ gets GROUP_AUTHORIZATION_FAILED);
- `request`: what the handler gets, with the parts the principal may not touch taken out (the
  topics of an OffsetCommit it may not READ), so a denied part changes nothing;
- `after`: how the handler's response gets the refused parts back, with their error codes
  (TOPIC_AUTHORIZATION_FAILED for those topics), or loses what must not be shown (topics a
  principal may not DESCRIBE are left out of Metadata and of group listings, never named).

A whole-request refusal is Kafka's error response of that request (protocol/error_response.py),
built for any API and version; only refusals of some of a request's items are built by their
policies. Every served API names a policy (tests/unit/test_authorizer.py checks it); an API
without one is refused outright while an authorizer is configured.
"""
from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from kcoord.protocol.api import API_TABLE, ApiKey
from kcoord.protocol.error_response import error_response
from kcoord.protocol.errors import ErrorCode
from kcoord.server.deferred import Deferred
from kcoord.server.security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType

if TYPE_CHECKING:
    from kcoord.server.config import Config
    from kcoord.server.context import RequestContext
    from kcoord.server.security.authorizer import Authorizer
    from kcoord.server.security.state import SecurityState
    from kcoord.server.session import Session
    from kcoord.server.topics import TopicRegistry
    from kcoord.storage.log_manager import LogManager

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                                AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE)
TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
ZERO_UUID = uuid.UUID(int=0)


class PolicyParts(NamedTuple):
    """The node's parts a policy reads (the topic registry, the logs, the configuration),
    given by the dispatcher when it guards a route."""

    config: Config
    topics: TopicRegistry
    logs: LogManager


class Access:
    """The authorizer as seen by one request: its principal, client host and API."""

    __slots__ = ("authorizer", "principal", "host", "api", "parts")

    def __init__(self, authorizer: Authorizer, principal: str, host: str, api: str, parts: PolicyParts) -> None:
        self.authorizer = authorizer
        self.principal = principal
        self.host = host
        self.api = api
        self.parts = parts  # what the policies look at besides the ACLs: topics, logs, config

    def allowed(self, op: AclOperation, rtype: ResourceType, name: str, log: bool = True) -> bool:
        return self.authorizer.authorize(self.principal, self.host, op, rtype, name, self.api, log)

    def cluster(self, op: AclOperation, log: bool = True) -> bool:
        return self.allowed(op, CLUSTER, CLUSTER_NAME, log)

    def allowed_names(self, op: AclOperation, rtype: ResourceType, names: Iterable[str], log: bool = True) -> set[str]:
        return {n for n in set(names) if self.allowed(op, rtype, n, log)}

    def operations(self, rtype: ResourceType, name: str) -> set[int]:
        """authorized_operations as kafka-python encodes it: the set of allowed operation codes."""
        return {int(op) for op in SUPPORTED_OPERATIONS[rtype]
                if self.authorizer.authorize(self.principal, self.host, op, rtype, name, log_denied=False)}


@dataclass(slots=True)
class Guarded:
    request: Any = None
    refusal: Any = None
    after: Callable[[Any], Any] | None = None
    close: str | None = None  # close the connection once the handler ran (Produce acks=0 with an error)


Policy = Callable[[Access, Any, int], Guarded]
# the hot direct routes' usual case, decided without building anything: True means the policy
# would let the request through unchanged (anything else goes through the policy itself)
AsIs = Callable[["Authorizer", str, str, Any, str], bool]

PASS = Guarded()  # the usual decision: nothing to change


def refused(a: Access, req: Any, version: int, code: ErrorCode, message: str | None = None) -> Guarded:
    """The whole request refused with `code`, answered as Kafka's error response of the request."""
    return Guarded(refusal=error_response(_SPECS_BY_NAME[a.api], version, req, code, message))


_SPECS_BY_NAME = {spec.name: spec for spec in API_TABLE.values()}  # Access names its API


def whole_group(op: AclOperation) -> Policy:
    """`op` on the request's group, or the request is refused GROUP_AUTHORIZATION_FAILED."""
    def policy(a: Access, req: Any, version: int) -> Guarded:
        if a.allowed(op, GROUP, req.group_id):
            return PASS
        return refused(a, req, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return policy


def cluster_op(op: AclOperation) -> Policy:
    """`op` on the cluster, or the request is refused CLUSTER_AUTHORIZATION_FAILED."""
    def policy(a: Access, req: Any, version: int) -> Guarded:
        if a.cluster(op):
            return PASS
        return refused(a, req, version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"Request {a.api} is not authorized.")
    return policy


def open_to_all(a: Access, req: Any, version: int) -> Guarded:
    """Needs no authorization (ApiVersions, and the SASL requests: authentication comes first)."""
    return PASS


def then(result: Any, fn: Callable[[Any], Any]) -> Any:
    """`fn` applied to a handler's answer, which may come later (a Deferred)."""
    if isinstance(result, Deferred):
        out: Deferred[Any] = Deferred()
        result.add_callback(lambda r: out.complete(r if _passthrough(r) else fn(r)))
        return out
    return result if _passthrough(result) else fn(result)


def _passthrough(r: Any) -> bool:
    from kcoord.server.dispatch import CloseConnection  # the dispatcher imports this module
    from kcoord.server.handlers.registry import NO_RESPONSE

    return r is None or r is NO_RESPONSE or isinstance(r, CloseConnection | bytes)


def _apply(policy: Policy | None, name: str, access: Access, handler: Callable[..., Any], args: tuple[Any, ...],
           req: Any, version: int) -> Any:
    if policy is None:
        close_connection(f"{name} has no authorization policy; refused while an authorizer is configured")
    g = policy(access, req, version)  # type: ignore[misc]
    if g is PASS:
        return handler(*args, req, version)
    if g.refusal is not None:
        return g.refusal
    result = handler(*args, g.request if g.request is not None else req, version)
    if g.close is not None:
        close_connection(g.close)
    return result if g.after is None else then(result, g.after)


def guarded(api: ApiKey, handler: Callable[..., Any], policy: Policy | None, security: SecurityState,
            parts: PolicyParts) -> Callable[..., Any]:
    """The handler (ctx, request, version) with `policy` in front of it."""
    name = _api_name(api)

    def handle(ctx: RequestContext, req: Any, version: int) -> Any:
        authorizer = security.authorizer
        if authorizer is None:  # not configured after all (tests build dispatchers by hand)
            return handler(ctx, req, version)
        access = Access(authorizer, ctx.principal, ctx.client_host, name, parts)
        return _apply(policy, name, access, handler, (ctx,), req, version)

    handle.__name__ = f"authorized_{getattr(handler, '__name__', 'handler')}"
    return handle


def guarded_direct(api: ApiKey, direct: Callable[..., Any], client: Callable[[], Session | str | None],
                   policy: Policy | None, security: SecurityState, parts: PolicyParts,
                   as_is: AsIs | None = None) -> Callable[..., Any]:
    """A direct route (request, version) with its policy in front: the hot Heartbeat and
    OffsetCommit stay off the RequestContext path when authorizing; `client()` is the
    connection the dispatcher is serving. `as_is` short-cuts the usual case (everything in the
    request allowed) to a few cached lookups."""
    name = _api_name(api)

    def handle(req: Any, version: int) -> Any:
        authorizer = security.authorizer
        if authorizer is None:
            return direct(req, version)
        c = client()
        if c is None or type(c) is str:
            principal, host = "User:ANONYMOUS", c or ""
        else:
            principal, host = c.principal, c.host  # type: ignore[union-attr]
        if as_is is not None and as_is(authorizer, principal, host, req, name):
            return direct(req, version)
        return _apply(policy, name, Access(authorizer, principal, host, name, parts), direct, (), req, version)

    return handle


def _api_name(api: int) -> str:
    spec = API_TABLE.get(api)
    return spec.name if spec is not None else str(api)


def clone(obj: Any, **changes: Any) -> Any:
    """A shallow copy of a kafka-python request with some fields replaced (the original is
    left alone: it may be what a log line or a retry looks at)."""
    out = copy.copy(obj)
    for k, v in changes.items():
        setattr(out, k, v)
    return out


def close_connection(reason: str) -> None:
    from kcoord.server.dispatch import CloseConnection

    raise CloseConnection(reason)
