"""tooldojo's toolzoo package; its issue fills it in."""
