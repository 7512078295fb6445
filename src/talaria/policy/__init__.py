"""The approval policy: which tool calls need a human's yes, and the answers remembered.

A service-layer package: it reads shell commands (`command_safety` and the rule modules),
turns the verdict on a tool call into an `approval.Assessment`, and keeps the session's
grants (`approval.ApprovalState`). It never imports the engine or the front ends.
"""
