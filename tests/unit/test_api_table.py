"""protocol/api.py's API_TABLE and server/handlers/routes.py's ROUTES declare each API by name
(its classes and handler load at its first request): check every declaration against what it
names."""
from __future__ import annotations

import importlib

import pytest

from kcoord.protocol.api import API_TABLE, ApiKey, ApiSpec
from kcoord.server.handlers.routes import _TABLE, ROUTES

SPECS = sorted(API_TABLE.values(), key=lambda s: s.key)


def _fresh(spec: ApiSpec) -> ApiSpec:
    return ApiSpec(spec.key, spec.name, spec.module, spec.min_version, spec.max_version)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_each_declared_api_names_classes_of_its_key_that_serve_its_versions(spec):
    spec = _fresh(spec)  # loads here, not in the shared table
    assert spec.request.__name__ == spec.name + "Request"
    assert spec.response.__name__ == spec.name + "Response"
    assert spec.request.API_KEY == spec.key == spec.response.API_KEY
    # kcoord serves some versions below the schema's lowest (ACLs v0), never above its highest
    assert spec.max_version <= spec.request.max_version
    assert spec.max_version <= spec.response.max_version
    assert len(spec.request_headers) == len(spec.response_headers) == spec.max_version + 1


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_header_versions_follow_the_flexible_versions(spec):
    spec = _fresh(spec)
    for v in range(spec.min_version, spec.max_version + 1):
        flexible = bool(spec.request.flexible_version_q(v))
        assert spec.request_header_version(v) == (2 if flexible else 1)
        expected = 0 if spec.key == ApiKey.API_VERSIONS else (1 if flexible else 0)
        assert spec.response_header_version(v) == expected


def test_a_spec_loads_its_classes_at_the_first_use_only():
    spec = _fresh(API_TABLE[ApiKey.OFFSET_COMMIT])
    assert not _is_set(spec, "request")
    cls = spec.request
    assert spec.request is cls and _is_set(spec, "response")
    with pytest.raises(AttributeError):
        spec.no_such_attribute  # noqa: B018


def _is_set(spec: ApiSpec, attr: str) -> bool:
    try:
        object.__getattribute__(spec, attr)
    except AttributeError:
        return False
    return True


def test_every_served_api_has_a_route_declared_once_whose_functions_load():
    keys = [d.key for d in _TABLE]
    assert len(keys) == len(set(keys))
    assert set(ROUTES) <= set(API_TABLE)
    for key in ROUTES:
        route = ROUTES[key]
        assert route.key == key and callable(route.handler)
        assert ROUTES[key] is route  # loaded once
    for d in _TABLE:
        if d.fast is not None:
            assert ROUTES[d.key].fast is getattr(importlib.import_module("kcoord.protocol.fastpath"), d.fast)
        if d.direct is not None:
            assert callable(ROUTES[d.key].direct)


def test_every_route_names_an_authorization_policy_that_loads_and_a_known_virtual_routing():
    """Everything about an API is on its route: its policy (and the quick check of a direct
    route's usual case) resolves to a function under server/security/policies/, and its
    virtual-broker routing is one server/virtual/routing.py knows."""
    from kcoord.server.virtual.routing import ROUTED

    kinds = {"group", "partitioned", "metadata", "find_coordinator", "describe_cluster", "list_groups"}
    for d in _TABLE:
        assert d.policy is not None, f"{d.key.name} names no authorization policy"
        assert callable(ROUTES[d.key].policy())
        if d.as_is is not None:
            assert d.direct is not None, f"{d.key.name}: a quick check only serves a direct route"
            assert callable(ROUTES[d.key].as_is())
        assert d.virtual is None or d.virtual in kinds
        assert (d.key in ROUTED) == (d.virtual is not None)
