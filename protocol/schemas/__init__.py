"""Message schemas kafka-python 3 does not carry, written for kcoord in kafka-python's JSON
schema format (name, type, versions, nullable versions, defaults; no documentation text).
protocol/messages.py builds the request and response classes from them."""
