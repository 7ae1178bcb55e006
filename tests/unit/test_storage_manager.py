"""kcoord.storage.log_manager and kcoord.storage.partition_metadata on a real directory."""
from __future__ import annotations

import os
import uuid

import pytest

from kcoord.storage.log import OFFSETS_SEGMENT_BYTES
from kcoord.storage.log_manager import LogManager, parse_partition_dir
from kcoord.storage.partition_metadata import (
    PartitionMetadataError,
    read_partition_metadata,
    topic_id_from_str,
    topic_id_to_str,
    write_partition_metadata,
)


@pytest.mark.parametrize("name, want", [
    ("orders-0", ("orders", 0)),
    ("my-topic-with-dashes-12", ("my-topic-with-dashes", 12)),
    ("__consumer_offsets-49", ("__consumer_offsets", 49)),
    ("orders-3.9f1e8a2c1d4b4f0a8e2c5f9d0b1a2c3d-delete", None),
    ("orders-3.9f1e8a2c1d4b4f0a8e2c5f9d0b1a2c3d-future", None),
    ("cleaner-offset-checkpoint", None),
    ("meta.properties", None),
    ("-1", None),
    ("orders-", None),
])
def test_parse_partition_dir(name, want):
    assert parse_partition_dir(name) == want


def test_topic_id_text_form_matches_kafka():
    # Kafka prints Uuid as unpadded URL-safe base64 of its 16 bytes.
    tid = uuid.UUID("fb7a4c8e-3f0e-4d4a-9c4f-0b1fd2e3a4c5")
    s = topic_id_to_str(tid)
    assert len(s) == 22 and "=" not in s and "+" not in s and "/" not in s
    assert topic_id_from_str(s) == tid
    assert topic_id_to_str(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"


def test_partition_metadata_round_trip(tmp_path):
    tid = uuid.uuid4()
    write_partition_metadata(str(tmp_path), tid)
    text = (tmp_path / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {topic_id_to_str(tid)}"
    assert read_partition_metadata(str(tmp_path)) == tid
    assert read_partition_metadata(str(tmp_path / "nope")) is None


@pytest.mark.parametrize("text", [
    "", "version: 0\n", "version 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ",
    "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA",  # the zero uuid
    "version: 0\ntopic_id: !!",
])
def test_partition_metadata_malformed(tmp_path, text):
    (tmp_path / "partition.metadata").write_text(text)
    with pytest.raises(PartitionMetadataError):
        read_partition_metadata(str(tmp_path))


def test_log_manager_create_discover_close(tmp_path):
    d = str(tmp_path / "logs")
    tid = uuid.uuid4()
    lm = LogManager(d)
    a = lm.create("orders-eu", 0, topic_id=tid)
    b = lm.create("orders-eu", 1, topic_id=tid)
    c = lm.create("__consumer_offsets", 7)
    assert lm.create("orders-eu", 0) is a
    assert c.segment_bytes == OFFSETS_SEGMENT_BYTES and a.segment_bytes == 1073741824
    a.append_records([(b"k", b"v")] * 3, 1)
    b.append_records([(b"k", b"v")], 1)
    c.append_records([(b"k", None)], 1)
    os.mkdir(os.path.join(d, "orders-eu-0.abc-delete"))
    open(os.path.join(d, "recovery-point-offset-checkpoint"), "w").close()
    lm.close()
    assert lm.get("orders-eu", 0) is None

    lm = LogManager(d)
    assert sorted(t for t, _ in lm) == [("__consumer_offsets", 7), ("orders-eu", 0), ("orders-eu", 1)]
    assert lm.get("orders-eu", 0).log_end_offset == 3
    assert lm.get("orders-eu", 1).log_end_offset == 1
    assert lm.get("__consumer_offsets", 7).segment_bytes == OFFSETS_SEGMENT_BYTES
    assert lm.partitions("orders-eu") == [0, 1]
    assert lm.topic_ids == {"orders-eu": tid}
    assert lm.get("missing", 0) is None
    lm.close()
