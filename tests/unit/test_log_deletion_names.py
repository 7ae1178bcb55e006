"""`-delete` directory names (storage/log_deletion.py), including the shared id a reset gives
every partition it sets aside at once (server/control/reset.py)."""
from __future__ import annotations

import uuid

from kcoord.storage.log_deletion import delete_dir_name, is_delete_dir
from kcoord.storage.log_manager import parse_partition_dir


def test_a_shared_id_still_gives_every_partition_its_own_name_that_no_start_up_opens() -> None:
    unique = uuid.uuid4().hex
    names = [delete_dir_name(t, p, unique) for t in ("orders", "orders-1", "__consumer_offsets") for p in range(3)]
    assert len(set(names)) == len(names)
    assert all(is_delete_dir(n) and parse_partition_dir(n) is None for n in names)
    assert delete_dir_name("orders", 2, unique) == f"orders-2.{unique}-delete"


def test_without_an_id_each_name_gets_a_new_one() -> None:
    a, b = delete_dir_name("t", 0), delete_dir_name("t", 0)
    assert a != b and is_delete_dir(a) and is_delete_dir(b)


def test_a_long_topic_is_shortened_to_fit_the_file_name_limit() -> None:
    name = delete_dir_name("x" * 249, 12, uuid.uuid4().hex)
    assert len(name) == 255 and is_delete_dir(name) and name.startswith("x" * 10)
