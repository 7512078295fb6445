"""Durable turns on Temporal (`talaria[temporal]`): the unchanged loop as a workflow, each
model call and each tool call an activity on a worker. `client` starts and follows turns,
`worker` serves them, `batch` runs a batch on the cluster; see docs/scale-out.md."""
