"""tooldojo's rl package; its issue fills it in."""
