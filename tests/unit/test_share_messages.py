"""The share-group API schemas (protocol/schemas/Share*.json and the *ShareGroupOffsets ones)
encode byte for byte what Kafka 4.3's Java classes encode, at every version Kafka 4.3 serves,
and decode back to the same values. The golden bytes (tests/unit/share_messages_golden.json)
were produced by kafka-clients 4.3.0 itself; its "how" field says how."""
from __future__ import annotations

import base64
import json
import pathlib
import uuid

import pytest

from kcoord.protocol import share_messages

GOLDEN = json.loads((pathlib.Path(__file__).parent / "share_messages_golden.json").read_text())["cases"]
SCHEMAS = pathlib.Path(share_messages.__file__).parent / "schemas"
CLASSES = {c.__name__: c for c in share_messages.ALL}

# Kafka 4.3's broker: (api key, lowest, highest) of each share API
SERVED = {
    "ShareGroupHeartbeat": (76, 1, 1),
    "ShareGroupDescribe": (77, 1, 1),
    "ShareFetch": (78, 1, 2),
    "ShareAcknowledge": (79, 1, 2),
    "DescribeShareGroupOffsets": (90, 0, 1),
    "AlterShareGroupOffsets": (91, 0, 0),
    "DeleteShareGroupOffsets": (92, 0, 0),
}


def _build(container, values: dict, version: int):
    """A kafka-python data object of `container`'s struct from plain values."""
    kwargs = {}
    for name, value in values.items():
        field = container.fields[name]
        if value is None:
            kwargs[name] = None
        elif field.is_struct():
            kwargs[name] = _build(field.data_class, value, version)
        elif field.is_struct_array():
            kwargs[name] = [_build(field.data_class, v, version) for v in value]
        elif field._type_str == "uuid":
            kwargs[name] = uuid.UUID(value)
        elif field._type_str == "records":
            kwargs[name] = base64.b64decode(value)
        else:
            kwargs[name] = value
    return container(version=version, **kwargs)


def _plain(obj, values: dict) -> dict:
    """The fields named in `values`, read back from a decoded object, as plain values."""
    out = {}
    for name, expected in values.items():
        got = getattr(obj, name)
        field = type(obj).fields[name]
        if got is None:
            out[name] = None
        elif field.is_struct():
            out[name] = _plain(got, expected)
        elif field.is_struct_array():
            out[name] = [_plain(g, e) for g, e in zip(got, expected, strict=True)]
        elif field._type_str == "uuid":
            out[name] = str(got)
        elif field._type_str == "records":
            out[name] = base64.b64encode(bytes(got)).decode()
        else:
            out[name] = got
    return out


def _id(case):
    return f"{case['message']}-v{case['version']}-{case['hex'][:12]}"


@pytest.mark.parametrize("case", GOLDEN, ids=_id)
def test_encodes_what_kafka_encodes(case):
    cls = CLASSES[case["message"]]
    msg = _build(cls, case["values"], case["version"])
    assert msg.encode(version=case["version"]).hex() == case["hex"]


@pytest.mark.parametrize("case", GOLDEN, ids=_id)
def test_decodes_what_kafka_encodes(case):
    cls = CLASSES[case["message"]]
    decoded = cls.decode(bytes.fromhex(case["hex"]), version=case["version"])
    assert _plain(decoded, case["values"]) == case["values"]
    again = _build(cls, _plain(decoded, case["values"]), case["version"])
    assert again.encode(version=case["version"]).hex() == case["hex"]


def test_every_served_version_has_a_golden_case():
    have = {(c["message"], c["version"]) for c in GOLDEN}
    for api, (key, lo, hi) in SERVED.items():
        for kind in ("Request", "Response"):
            cls = CLASSES[api + kind]
            assert cls.API_KEY == key
            schema = json.loads((SCHEMAS / f"{api}{kind}.json").read_text())
            assert schema["validVersions"] == (f"{lo}" if lo == hi else f"{lo}-{hi}")
            assert cls.max_version == hi
            for v in range(lo, hi + 1):
                assert (api + kind, v) in have, (api + kind, v)


def test_served_at_kafka_43_versions():
    """The share-partition APIs are served (docs/share-groups.md) at the versions their schemas
    declare, which are Kafka 4.3's."""
    from kcoord.protocol.api import API_TABLE

    for key, versions in {78: (1, 2), 79: (1, 2), 90: (0, 1), 91: (0, 0), 92: (0, 0)}.items():
        spec = API_TABLE[key]
        assert (spec.min_version, spec.max_version) == versions
        assert spec.request.__module__ == "kcoord.protocol.share_messages"
def test_served_as_kafka_4_3_serves_them():
    """ShareGroupHeartbeat and ShareGroupDescribe are served (the share group coordinator) at the
    versions of these classes; the other share APIs are advertised once they are served."""
    from kcoord.protocol import api
    from kcoord.server.handlers.routes import ROUTES

    for api_name, key in (("ShareGroupHeartbeat", 76), ("ShareGroupDescribe", 77)):
        spec = api.API_TABLE[key]
        assert (spec.min_version, spec.max_version) == SERVED[api_name][1:]
        assert key in ROUTES
