"""A virtual file manager: a file tree held in the tool state (never the real disk), with a trash can and a disk quota."""

CATEGORY = "desktop_systems"
DESCRIPTION = "A desktop file manager over a virtual file tree: list, read, write, move, copy, delete to trash, restore, and a disk quota."
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["copy_vfs_file", "move_vfs_path"], "message": "the file system is busy; nothing changed, retry"},
    {"kind": "partial", "tools": ["list_vfs_directory", "list_vfs_trash"]},
    {"kind": "rate_limit", "tools": ["*"]},
]
