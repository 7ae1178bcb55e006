"""The PySpark compaction job for __consumer_offsets (`kcoord-compact`, sidecar/compact.py).

Only kcoord.sidecar.compact imports pyspark (the optional `spark` dependency group); the compaction
itself (kcoord.sidecar.compaction), the output writer and the replay check are plain Python.
"""
