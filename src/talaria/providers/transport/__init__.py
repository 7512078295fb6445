"""Transport: how request bytes reach an endpoint and the answer comes back.

`http` holds the shared connection pools (httpx2), `sse` reads event streams, `auth` says
where each provider's requests go and with which headers. No official SDK is involved.
"""
