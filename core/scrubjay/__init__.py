"""scrubjay: agent memory that knows how fast each thing it remembers goes stale."""
