"""agent_tools."""
