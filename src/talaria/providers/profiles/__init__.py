"""Profiles: what differs per model family and endpoint, as data resolved once per model."""

from talaria.providers.profiles.profile import ModelProfile
from talaria.providers.profiles.table import profile_for, profile_of

__all__ = ["ModelProfile", "profile_for", "profile_of"]
