"""Profiles: what differs per model family and endpoint, as data resolved once per model."""
