from hypothesis import given
from hypothesis import strategies as st

from kcoord.protocol.partitioner import INT_MIN, java_string_hashcode, kafka_abs, partition_for


def java_hash_reference(s: str) -> int:
    """Java's String.hashCode written the slow, obvious way over UTF-16 code units."""
    units = []
    for ch in s:
        cp = ord(ch)
        if cp >= 0x10000:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    h = 0
    for u in units:
        h = (h * 31 + u) % 2**32
    return h - 2**32 if h >= 2**31 else h


def test_known_groups():
    assert partition_for("testgroup", 50) == 27
    assert java_string_hashcode("polygenelubricants") == INT_MIN
    assert partition_for("polygenelubricants", 50) == 0


def test_java_values():
    # Values printed by Java 17's "...".hashCode()
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("a") == 97
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("é") == 233
    assert java_string_hashcode("日本") == 835047
    # Outside the BMP: two UTF-16 code units each
    assert java_string_hashcode("\U0001F600") == 1772899
    assert java_string_hashcode("grüppe-\U0001F680-1") == 1337318816


def test_kafka_abs():
    assert kafka_abs(INT_MIN) == 0
    assert kafka_abs(-5) == 5


@given(st.text())
def test_matches_reference(s):
    assert java_string_hashcode(s) == java_hash_reference(s)
    assert 0 <= partition_for(s, 50) < 50
