"""The live network fuzzer: real clients' requests captured (capture.py), mutated and sent (netfuzz.py)."""
