"""`talaria serve`: an HTTP front end (OpenAI-compatible endpoints, runs with an event stream,
sessions, a web page) that drives agents only through the engine's event protocol.

Nothing here is imported by `import talaria`; Starlette and uvicorn come with `talaria[server]`.
"""
