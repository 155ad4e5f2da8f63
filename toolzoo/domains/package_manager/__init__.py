"""A system package manager over a virtual package index: versions, dependencies, conflicts, holds and disk space."""

CATEGORY = "desktop_systems"
DESCRIPTION = "apt-like package management on a virtual machine: search the index, install with dependency resolution, remove, upgrade, hold."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["install_package", "upgrade_package"], "message": "the package mirror timed out; nothing was installed, retry"},
    {"kind": "rate_limit", "tools": ["search_package_index", "get_package_info"]},
    {"kind": "partial", "tools": ["list_installed_packages"]},
]
