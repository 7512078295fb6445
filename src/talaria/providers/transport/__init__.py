"""Transport: how request bytes reach an endpoint and the answer comes back."""
