"""Tools that use the agent's own services (the task list, memory, session search,
delegation), and the catalogue of built-in toolsets an agent chooses from."""
