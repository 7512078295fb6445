"""Public test doubles: a scripted in-process model and a scripted HTTP provider."""
