"""Conversations as trees on disk, their store, and the view of a path a model call is sent."""
