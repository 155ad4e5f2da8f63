from typing import Literal

from toolzoo.dsl import ToolFailure, tool


def _vfs_norm(path):
    p = path.strip()
    if not p.startswith("/") or "//" in p or "\x00" in p:
        raise ToolFailure("invalid_path", f"{path!r} is not an absolute path like /home/docs/notes.txt")
    parts = [x for x in p.split("/") if x]
    if any(x in (".", "..") for x in parts):
        raise ToolFailure("invalid_path", f"{path!r}: '.' and '..' are not allowed; give the full path")
    return "/" + "/".join(parts)


def _vfs_parent(path):
    return path.rsplit("/", 1)[0] or "/"


def _vfs_under(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")


def _vfs_used(state):
    return sum(f["size"] for f in state["files"].values()) + sum(t["size"] for t in state["trash"].values())


def _vfs_need(state, extra):
    free = state["quota_bytes"] - _vfs_used(state)
    if extra > free:
        raise ToolFailure("quota_exceeded", f"needs {extra} bytes but only {free} are free; delete files and empty the trash first")


def _vfs_exists(state, path):
    return path in state["files"] or path in state["dirs"]


def _vfs_need_parent(state, path):
    if _vfs_parent(path) not in state["dirs"]:
        raise ToolFailure("parent_not_found", f"folder {_vfs_parent(path)} does not exist; create it with make_vfs_directory")


@tool(errors={"invalid_path": "not an absolute path", "dir_not_found": "no such folder",
              "not_a_directory": "the path is a file"})
def list_vfs_directory(state, path: str = "/", recursive: bool = False) -> dict:
    """List a folder's entries (name, type, size, modified), optionally everything below it.

    Args:
        path: the folder, e.g. "/home/docs".
        recursive: include all sub-folders' contents too.
    """
    p = _vfs_norm(path)
    if p in state["files"]:
        raise ToolFailure("not_a_directory", f"{p} is a file; use read_vfs_file")
    if p not in state["dirs"]:
        raise ToolFailure("dir_not_found", f"no folder {p}; list its parent to see what exists")
    out = []
    for d in sorted(state["dirs"]):
        if d != p and _vfs_under(d, p) and (recursive or _vfs_parent(d) == p):
            out.append({"path": d, "type": "dir"})
    for f, meta in sorted(state["files"].items()):
        if _vfs_under(f, p) and (recursive or _vfs_parent(f) == p):
            out.append({"path": f, "type": "file", "size": meta["size"], "modified": meta["modified"],
                        "readonly": meta["readonly"]})
    return {"path": p, "entries": out}


@tool(errors={"invalid_path": "not an absolute path", "file_not_found": "no such file", "is_a_directory": "the path is a folder"})
def read_vfs_file(state, path: str) -> dict:
    """Read a file's text content.

    Args:
        path: the file, e.g. "/home/docs/report.txt".
    """
    p = _vfs_norm(path)
    if p in state["dirs"]:
        raise ToolFailure("is_a_directory", f"{p} is a folder; use list_vfs_directory")
    if p not in state["files"]:
        raise ToolFailure("file_not_found", f"no file {p}")
    return {"path": p, **state["files"][p]}


@tool(effect="write", errors={
    "invalid_path": "not an absolute path", "parent_not_found": "the containing folder does not exist",
    "is_a_directory": "the path is a folder", "file_exists": "create mode but the file exists",
    "file_not_found": "overwrite/append mode but the file does not exist", "read_only": "the file is read-only",
    "quota_exceeded": "not enough free space"})
def write_vfs_file(state, path: str, content: str, mode: Literal["create", "overwrite", "append"] = "create") -> dict:
    """Create a file, or overwrite or append to an existing one.

    Args:
        path: the file, e.g. "/home/docs/todo.txt".
        content: the text to write.
        mode: "create" a new file (fails if it exists), "overwrite" or "append" to an existing file.
    """
    p = _vfs_norm(path)
    if p in state["dirs"]:
        raise ToolFailure("is_a_directory", f"{p} is a folder")
    _vfs_need_parent(state, p)
    old = state["files"].get(p)
    if mode == "create" and old:
        raise ToolFailure("file_exists", f"{p} exists; use mode overwrite or append, or another name")
    if mode != "create" and not old:
        raise ToolFailure("file_not_found", f"no file {p} to {mode}; use mode create")
    if old and old["readonly"]:
        raise ToolFailure("read_only", f"{p} is read-only and cannot be changed")
    new = (old["content"] if mode == "append" else "") + content
    size = len(new.encode("utf-8"))
    _vfs_need(state, size - (old["size"] if old else 0))
    state["files"][p] = {"content": new, "size": size, "modified": state["now"], "readonly": False}
    return {"path": p, "size": size, "mode": mode}


@tool(effect="write", errors={"invalid_path": "not an absolute path", "already_exists": "a file or folder has that path",
                              "parent_not_found": "the containing folder does not exist"})
def make_vfs_directory(state, path: str, parents: bool = False) -> dict:
    """Create a folder, optionally with its missing parent folders.

    Args:
        path: the new folder, e.g. "/home/music".
        parents: also create missing parent folders.
    """
    p = _vfs_norm(path)
    if _vfs_exists(state, p):
        raise ToolFailure("already_exists", f"{p} already exists")
    chain, cur = [], p
    while cur not in state["dirs"]:
        if cur in state["files"]:
            raise ToolFailure("parent_not_found", f"{cur} is a file, not a folder")
        chain.append(cur)
        cur = _vfs_parent(cur)
    if len(chain) > 1 and not parents:
        raise ToolFailure("parent_not_found", f"folder {_vfs_parent(p)} does not exist; pass parents=true or create it first")
    state["dirs"].extend(reversed(chain))
    return {"created": list(reversed(chain))}


@tool(effect="write", errors={
    "invalid_path": "not an absolute path", "source_not_found": "nothing at the source path",
    "destination_exists": "something is already at the destination", "parent_not_found": "the destination folder does not exist",
    "protected_path": "system folders cannot be moved", "read_only": "a read-only file would move",
    "invalid_move": "a folder cannot move into itself"})
def move_vfs_path(state, source: str, destination: str) -> dict:
    """Move or rename a file or folder (with everything in it).

    Args:
        source: what to move, e.g. "/home/docs/report.txt".
        destination: the full new path, e.g. "/home/projects/report.txt".
    """
    src, dst = _vfs_norm(source), _vfs_norm(destination)
    if src in state["protected"]:
        raise ToolFailure("protected_path", f"{src} is a protected folder and cannot be moved")
    if not _vfs_exists(state, src):
        raise ToolFailure("source_not_found", f"nothing at {src}")
    if _vfs_under(dst, src):
        raise ToolFailure("invalid_move", f"cannot move {src} into itself")
    if _vfs_exists(state, dst):
        raise ToolFailure("destination_exists", f"{dst} already exists; choose another name or delete it first")
    _vfs_need_parent(state, dst)
    moving = [f for f in state["files"] if _vfs_under(f, src)]
    if any(state["files"][f]["readonly"] for f in moving):
        raise ToolFailure("read_only", f"{src} is or contains read-only files, which cannot be moved")
    for f in moving:
        state["files"][dst + f[len(src):]] = state["files"].pop(f)
    state["dirs"] = [dst + d[len(src):] if _vfs_under(d, src) else d for d in state["dirs"]]
    return {"moved": src, "to": dst, "files_moved": len(moving)}


@tool(effect="write", errors={
    "invalid_path": "not an absolute path", "source_not_found": "no file at the source path",
    "is_a_directory": "folders cannot be copied", "destination_exists": "something is already at the destination",
    "parent_not_found": "the destination folder does not exist", "quota_exceeded": "not enough free space"})
def copy_vfs_file(state, source: str, destination: str) -> dict:
    """Copy a single file to a new path (the copy is writable).

    Args:
        source: the file to copy.
        destination: the full path of the copy.
    """
    src, dst = _vfs_norm(source), _vfs_norm(destination)
    if src in state["dirs"]:
        raise ToolFailure("is_a_directory", f"{src} is a folder; only files can be copied")
    if src not in state["files"]:
        raise ToolFailure("source_not_found", f"no file {src}")
    if _vfs_exists(state, dst):
        raise ToolFailure("destination_exists", f"{dst} already exists")
    _vfs_need_parent(state, dst)
    meta = state["files"][src]
    _vfs_need(state, meta["size"])
    state["files"][dst] = {**meta, "modified": state["now"], "readonly": False}
    return {"copied": src, "to": dst, "size": meta["size"]}


@tool(effect="write", errors={
    "invalid_path": "not an absolute path", "path_not_found": "nothing at the path",
    "protected_path": "system folders cannot be deleted", "directory_not_empty": "the folder has contents",
    "read_only": "read-only files cannot be deleted"})
def delete_vfs_path(state, path: str, recursive: bool = False) -> dict:
    """Move a file or folder to the trash (it still counts against the quota until the trash is emptied).

    Args:
        path: the file or folder to delete.
        recursive: required to delete a folder that is not empty.
    """
    p = _vfs_norm(path)
    if p in state["protected"]:
        raise ToolFailure("protected_path", f"{p} is protected and cannot be deleted")
    if not _vfs_exists(state, p):
        raise ToolFailure("path_not_found", f"nothing at {p}")
    files = sorted(f for f in state["files"] if _vfs_under(f, p))
    dirs = sorted(d for d in state["dirs"] if _vfs_under(d, p))
    if dirs and (len(dirs) > 1 or files) and not recursive:
        raise ToolFailure("directory_not_empty", f"{p} is not empty; confirm and pass recursive=true")
    if any(state["files"][f]["readonly"] for f in files):
        raise ToolFailure("read_only", f"{p} is or contains read-only files, which cannot be deleted")
    tid = f"T-{state['next_trash']}"
    state["next_trash"] += 1
    moved = {f: state["files"].pop(f) for f in files}
    state["dirs"] = [d for d in state["dirs"] if d not in dirs]
    state["trash"][tid] = {"original_path": p, "type": "dir" if dirs else "file", "deleted_at": state["now"],
                           "dirs": dirs, "files": moved, "size": sum(m["size"] for m in moved.values())}
    return {"trash_id": tid, "deleted": p, "files": len(moved)}


@tool()
def list_vfs_trash(state) -> dict:
    """List what is in the trash: id, original path, type, size and when it was deleted."""
    return {"items": [{"trash_id": tid, "original_path": t["original_path"], "type": t["type"], "size": t["size"],
                       "deleted_at": t["deleted_at"]} for tid, t in sorted(state["trash"].items())]}


@tool(effect="write", errors={"trash_item_not_found": "unknown trash id",
                              "restore_conflict": "something now exists at the original path",
                              "parent_not_found": "the original containing folder no longer exists"})
def restore_vfs_trash_item(state, trash_id: str) -> dict:
    """Put a trashed file or folder back where it was.

    Args:
        trash_id: the trash entry, e.g. "T-1" (see list_vfs_trash).
    """
    if trash_id not in state["trash"]:
        raise ToolFailure("trash_item_not_found", f"no trash entry {trash_id}; see list_vfs_trash")
    t = state["trash"][trash_id]
    p = t["original_path"]
    if _vfs_exists(state, p):
        raise ToolFailure("restore_conflict", f"{p} exists again; move it away before restoring")
    _vfs_need_parent(state, p)
    del state["trash"][trash_id]
    state["dirs"].extend(t["dirs"])
    state["files"].update(t["files"])
    return {"restored": p, "files": len(t["files"])}


@tool(effect="write", errors={"trash_item_not_found": "unknown trash id"})
def empty_vfs_trash(state, trash_id: str | None = None) -> dict:
    """Permanently delete one trash entry, or the whole trash; frees the space it used.

    Args:
        trash_id: the entry to purge; null purges everything.
    """
    if trash_id is not None and trash_id not in state["trash"]:
        raise ToolFailure("trash_item_not_found", f"no trash entry {trash_id}; see list_vfs_trash")
    ids = [trash_id] if trash_id else sorted(state["trash"])
    freed = sum(state["trash"].pop(i)["size"] for i in ids)
    return {"purged": ids, "freed_bytes": freed}


@tool()
def get_vfs_disk_usage(state) -> dict:
    """Disk usage against the quota: bytes used by files and by the trash, bytes free, and usage per top-level folder."""
    by_top = {}
    for f, meta in state["files"].items():
        top = "/" + f.split("/")[1] if f.count("/") > 1 else "/"
        by_top[top] = by_top.get(top, 0) + meta["size"]
    trash = sum(t["size"] for t in state["trash"].values())
    used = _vfs_used(state)
    return {"quota_bytes": state["quota_bytes"], "used_bytes": used, "trash_bytes": trash,
            "free_bytes": state["quota_bytes"] - used, "by_folder": dict(sorted(by_top.items()))}
