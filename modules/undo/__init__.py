"""Undo: what each task changed, kept so it can be put back, and what changed since."""
