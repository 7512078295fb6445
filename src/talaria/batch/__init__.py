"""Many independent tasks, each its own session: locally (`local`) or on Temporal
(`talaria.durable.batch`); both read and write the files described in `tasks`."""
