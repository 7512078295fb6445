"""Hooks in Claude Code's settings shape: shell commands and HTTP endpoints the user configures
to run at points of a session (before a tool call, when a prompt is submitted, ...). They are
registered on the same `HookBus` as the in-process plugin hooks. See docs/hooks.md."""
