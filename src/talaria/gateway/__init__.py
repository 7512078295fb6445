"""`talaria gateway`: the agent in the chats people already use (docs/gateway.md).

A thin client of the engine's event protocol, like the server: each chat is a session, and
each platform an adapter behind the small interface in `talaria.gateway.platform`.
"""
