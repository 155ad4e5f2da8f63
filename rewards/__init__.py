"""tooldojo's rewards package; its issue fills it in."""
