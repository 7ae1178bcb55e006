"""Kafka's unsigned varint (flexible versions' lengths and counts), written."""
from __future__ import annotations


def uvarint(n: int) -> bytes:
    if n < 0x80:  # nearly every length and count: one byte
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
