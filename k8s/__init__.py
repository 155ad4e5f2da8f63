"""tooldojo's k8s package; its issue fills it in."""
