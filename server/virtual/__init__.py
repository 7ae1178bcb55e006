"""Virtual brokers: one kcoord serving several node ids (kcoord.virtual.brokers; cluster.py, routing.py)."""
