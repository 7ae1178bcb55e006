"""The classic-protocol group coordinator: state machine, members, offsets."""
