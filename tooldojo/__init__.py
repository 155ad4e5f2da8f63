"""The root of the `dojo` CLI; each package mounts its own sub-commands."""
