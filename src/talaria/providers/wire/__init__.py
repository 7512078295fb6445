"""Wire formats: one module per API, turning canonical requests into bytes and back."""
