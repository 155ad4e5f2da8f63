"""tooldojo's synth package; its issue fills it in."""
