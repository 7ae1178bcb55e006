"""Bytes <-> objects for the Kafka wire protocol and the __consumer_offsets records.

Nothing in this package touches asyncio or the filesystem.
"""
