"""file_manager: every tool, its success path and its declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("file_manager") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _used(state):
    return sum(f["size"] for f in state["files"].values()) + sum(t["size"] for t in state["trash"].values())


def _set_free(h, free):
    s = h.state()
    s["quota_bytes"] = _used(s) + free
    h.sandbox.reset(s)


def test_list_vfs_directory(h):
    out = h.ok("list_vfs_directory", {"path": "/home/docs/"})
    assert {e["path"] for e in out["entries"]} == {"/home/docs/report.txt", "/home/docs/budget.csv", "/home/docs/letter.md"}
    top = h.ok("list_vfs_directory", {"path": "/home"})["entries"]
    assert {e["path"] for e in top} == {"/home/docs", "/home/photos", "/home/projects"}
    deep = h.ok("list_vfs_directory", {"path": "/home/projects", "recursive": True})["entries"]
    assert "/home/projects/site/index.html" in {e["path"] for e in deep}
    h.err("list_vfs_directory", {"path": "/home/music"}, code="dir_not_found")
    h.err("list_vfs_directory", {"path": "/home/docs/report.txt"}, code="not_a_directory")
    h.err("list_vfs_directory", {"path": "home/docs"}, code="invalid_path")
    h.err("list_vfs_directory", {"path": "/home/../system"}, code="invalid_path")
    h.err("list_vfs_directory", {"recursive": "yes"}, kind="invalid_arguments")


def test_read_vfs_file(h):
    r = h.ok("read_vfs_file", {"path": "/home/docs/report.txt"})
    assert r["content"] == h.state()["files"]["/home/docs/report.txt"]["content"] and r["size"] == len(r["content"])
    h.err("read_vfs_file", {"path": "/home/docs/nope.txt"}, code="file_not_found")
    h.err("read_vfs_file", {"path": "/home/docs"}, code="is_a_directory")
    h.err("read_vfs_file", {"path": "report.txt"}, code="invalid_path")


def test_write_vfs_file(h):
    h.ok("write_vfs_file", {"path": "/home/docs/todo.txt", "content": "buy milk"})
    assert h.state()["files"]["/home/docs/todo.txt"]["content"] == "buy milk"
    h.ok("write_vfs_file", {"path": "/home/docs/todo.txt", "content": "; fix bike", "mode": "append"})
    f = h.state()["files"]["/home/docs/todo.txt"]
    assert f["content"] == "buy milk; fix bike" and f["size"] == 18 and f["modified"] == "2024-06-10T09:00"
    h.ok("write_vfs_file", {"path": "/home/docs/todo.txt", "content": "done", "mode": "overwrite"})
    assert h.ok("read_vfs_file", {"path": "/home/docs/todo.txt"})["content"] == "done"
    h.err("write_vfs_file", {"path": "/home/docs/todo.txt", "content": "x"}, code="file_exists")
    h.err("write_vfs_file", {"path": "/home/docs/new.txt", "content": "x", "mode": "append"}, code="file_not_found")
    h.err("write_vfs_file", {"path": "/home/music/a.txt", "content": "x"}, code="parent_not_found")
    h.err("write_vfs_file", {"path": "/home/docs", "content": "x", "mode": "overwrite"}, code="is_a_directory")
    h.err("write_vfs_file", {"path": "/system/hosts", "content": "x", "mode": "overwrite"}, code="read_only")
    h.err("write_vfs_file", {"path": "docs/a.txt", "content": "x"}, code="invalid_path")
    h.err("write_vfs_file", {"path": "/home/docs/a.txt", "content": "x", "mode": "replace"}, kind="invalid_arguments")
    _set_free(h, 10)
    h.err("write_vfs_file", {"path": "/home/docs/big.txt", "content": "x" * 11}, code="quota_exceeded")
    h.ok("write_vfs_file", {"path": "/home/docs/big.txt", "content": "x" * 10})


def test_make_vfs_directory(h):
    assert h.ok("make_vfs_directory", {"path": "/home/music"})["created"] == ["/home/music"]
    assert "/home/music" in h.state()["dirs"]
    h.err("make_vfs_directory", {"path": "/home/music"}, code="already_exists")
    h.err("make_vfs_directory", {"path": "/home/video/2024"}, code="parent_not_found")
    r = h.ok("make_vfs_directory", {"path": "/home/video/2024", "parents": True})
    assert r["created"] == ["/home/video", "/home/video/2024"]
    h.err("make_vfs_directory", {"path": "/home/./x"}, code="invalid_path")


def test_move_vfs_path(h):
    h.ok("move_vfs_path", {"source": "/home/docs/report.txt", "destination": "/home/projects/report.txt"})
    s = h.state()
    assert "/home/projects/report.txt" in s["files"] and "/home/docs/report.txt" not in s["files"]
    h.ok("move_vfs_path", {"source": "/home/projects", "destination": "/home/docs/projects"})
    s = h.state()
    assert "/home/docs/projects/site/index.html" in s["files"] and "/home/docs/projects/site" in s["dirs"]
    assert not any(d.startswith("/home/projects") for d in s["dirs"])
    h.err("move_vfs_path", {"source": "/home/nothing", "destination": "/home/x"}, code="source_not_found")
    h.err("move_vfs_path", {"source": "/home/docs/budget.csv", "destination": "/home/docs/letter.md"}, code="destination_exists")
    h.err("move_vfs_path", {"source": "/home/docs/budget.csv", "destination": "/home/music/b.csv"}, code="parent_not_found")
    h.err("move_vfs_path", {"source": "/home", "destination": "/users"}, code="protected_path")
    h.err("move_vfs_path", {"source": "/system/hosts", "destination": "/home/hosts"}, code="read_only")
    h.err("move_vfs_path", {"source": "/home/docs", "destination": "/home/docs/inner"}, code="invalid_move")
    h.err("move_vfs_path", {"source": "/home/docs", "destination": ""}, code="invalid_path")


def test_copy_vfs_file(h):
    h.ok("copy_vfs_file", {"source": "/system/hosts", "destination": "/home/hosts.bak"})
    s = h.state()
    assert s["files"]["/home/hosts.bak"]["content"] == s["files"]["/system/hosts"]["content"]
    assert s["files"]["/home/hosts.bak"]["readonly"] is False
    h.err("copy_vfs_file", {"source": "/home/docs", "destination": "/home/docs2"}, code="is_a_directory")
    h.err("copy_vfs_file", {"source": "/home/none.txt", "destination": "/home/b.txt"}, code="source_not_found")
    h.err("copy_vfs_file", {"source": "/system/hosts", "destination": "/home/hosts.bak"}, code="destination_exists")
    h.err("copy_vfs_file", {"source": "/system/hosts", "destination": "/nope/hosts"}, code="parent_not_found")
    h.err("copy_vfs_file", {"source": "/system/hosts", "destination": "hosts"}, code="invalid_path")
    _set_free(h, 1)
    h.err("copy_vfs_file", {"source": "/system/hosts", "destination": "/home/hosts.2"}, code="quota_exceeded")


def test_delete_vfs_path(h):
    before = _used(h.state())
    tid = h.ok("delete_vfs_path", {"path": "/home/docs/letter.md"})["trash_id"]
    s = h.state()
    assert "/home/docs/letter.md" not in s["files"] and s["trash"][tid]["original_path"] == "/home/docs/letter.md"
    assert _used(s) == before  # trash still counts
    h.err("delete_vfs_path", {"path": "/home/projects"}, code="directory_not_empty")
    r = h.ok("delete_vfs_path", {"path": "/home/projects", "recursive": True})
    s = h.state()
    assert r["files"] == 3 and not any(d.startswith("/home/projects") for d in s["dirs"])
    h.ok("make_vfs_directory", {"path": "/home/empty"})
    h.ok("delete_vfs_path", {"path": "/home/empty"})
    h.err("delete_vfs_path", {"path": "/home/docs/letter.md"}, code="path_not_found")
    h.err("delete_vfs_path", {"path": "/home", "recursive": True}, code="protected_path")
    h.ok("make_vfs_directory", {"path": "/home/sys"})
    h.ok("copy_vfs_file", {"source": "/system/hosts", "destination": "/home/sys/hosts"})
    s = h.state()
    s["files"]["/home/sys/hosts"]["readonly"] = True
    h.sandbox.reset(s)
    h.err("delete_vfs_path", {"path": "/home/sys", "recursive": True}, code="read_only")
    h.err("delete_vfs_path", {"path": "."}, code="invalid_path")


def test_list_vfs_trash(h):
    h.ok("delete_vfs_path", {"path": "/home/photos", "recursive": True})
    items = h.ok("list_vfs_trash", {})["items"]
    assert [i["original_path"] for i in items] == ["/home/docs/old_draft.txt", "/home/photos"]
    assert items[1]["type"] == "dir" and items[1]["size"] == h.state()["trash"][items[1]["trash_id"]]["size"]


def test_restore_vfs_trash_item(h):
    tid = h.ok("delete_vfs_path", {"path": "/home/projects", "recursive": True})["trash_id"]
    h.ok("restore_vfs_trash_item", {"trash_id": tid})
    s = h.state()
    assert "/home/projects/site/style.css" in s["files"] and "/home/projects/site" in s["dirs"] and tid not in s["trash"]
    h.err("restore_vfs_trash_item", {"trash_id": tid}, code="trash_item_not_found")
    h.ok("write_vfs_file", {"path": "/home/docs/old_draft.txt", "content": "new draft"})
    h.err("restore_vfs_trash_item", {"trash_id": "T-1"}, code="restore_conflict")
    t2 = h.ok("delete_vfs_path", {"path": "/home/docs/old_draft.txt"})["trash_id"]
    h.ok("delete_vfs_path", {"path": "/home/docs", "recursive": True})
    h.err("restore_vfs_trash_item", {"trash_id": t2}, code="parent_not_found")


def test_empty_vfs_trash(h):
    size = h.state()["trash"]["T-1"]["size"]
    assert h.ok("empty_vfs_trash", {"trash_id": "T-1"})["freed_bytes"] == size
    assert h.state()["trash"] == {}
    h.err("empty_vfs_trash", {"trash_id": "T-1"}, code="trash_item_not_found")
    h.ok("delete_vfs_path", {"path": "/home/photos", "recursive": True})
    h.ok("delete_vfs_path", {"path": "/home/docs/budget.csv"})
    assert len(h.ok("empty_vfs_trash", {})["purged"]) == 2
    assert h.state()["trash"] == {}


def test_get_vfs_disk_usage(h):
    s = h.state()
    u = h.ok("get_vfs_disk_usage", {})
    assert u["used_bytes"] == _used(s) and u["free_bytes"] == s["quota_bytes"] - _used(s)
    assert u["trash_bytes"] == s["trash"]["T-1"]["size"]
    assert set(u["by_folder"]) == {"/home", "/system"}
    h.ok("empty_vfs_trash", {})
    assert h.ok("get_vfs_disk_usage", {})["free_bytes"] == u["free_bytes"] + u["trash_bytes"]
