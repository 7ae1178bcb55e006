"""The group coordinator: the groups of every type (group_manager), their committed offsets
(offset_manager), one package per group type (classic/), composed in coordinator.py."""
