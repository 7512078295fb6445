"""Skills in the Agent Skills format: a folder with a `SKILL.md` (front matter `name` and
`description`, then the instructions) and any files beside it. See docs/skills.md."""
