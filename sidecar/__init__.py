"""The PySpark compaction job for __consumer_offsets (`kcoord-compact`, sidecar/compact.py).

Only sidecar.compact imports pyspark (the optional `spark` dependency group); the compaction
itself (sidecar.compaction), the output writer and the replay check are plain Python.
"""
