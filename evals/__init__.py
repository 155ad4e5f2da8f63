"""tooldojo's evals package; its issue fills it in."""
