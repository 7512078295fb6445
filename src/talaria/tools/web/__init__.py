"""The web tools (`web_fetch`, `web_search`): the `web` toolset; see docs/web.md."""
