"""Resilience: failure classification, retry, credential refresh and the fallback chain."""
