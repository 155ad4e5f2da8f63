"""notes_app: every tool, its success path, resulting state and declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("notes_app") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _note_titled(h, title, status="active"):
    return next(nid for nid, n in sorted(h.state()["notes"].items()) if n["title"] == title and n["status"] == status)


def test_list_notebooks(h):
    r = h.ok("list_notebooks", {})
    by_id = {nb["notebook_id"]: nb for nb in r["notebooks"]}
    assert by_id["NB-1"]["name"] == "Work" and by_id["NB-1"]["archived_notes"] == 1
    assert by_id["NB-2"]["active_notes"] == 3
    h.err("list_notebooks", {"verbose": True}, kind="invalid_arguments")


def test_create_notebook(h):
    r = h.ok("create_notebook", {"name": "Garden"})
    assert h.state()["notebooks"][r["notebook_id"]]["name"] == "Garden"
    h.err("create_notebook", {"name": "garden"}, code="duplicate_notebook_name")
    h.err("create_notebook", {"name": "WORK"}, code="duplicate_notebook_name")
    h.err("create_notebook", {"name": ""}, kind="invalid_arguments")


def test_list_notebook_notes(h):
    r = h.ok("list_notebook_notes", {"notebook_id": "NB-1"})
    ids = [n["note_id"] for n in r["notes"]]
    assert ids[0] == "N-101"  # pinned first
    assert set(ids) == {"N-101", "N-102", "N-103", "N-104"}
    r = h.ok("list_notebook_notes", {"notebook_id": "NB-1", "include_archived": True})
    assert len(r["notes"]) == 5
    h.err("list_notebook_notes", {"notebook_id": "NB-9"}, code="notebook_not_found")


def test_open_note(h):
    n = h.ok("open_note", {"note_id": "N-105"})
    assert n["title"] == "Groceries" and n["notebook_id"] == "NB-2" and "shopping" in n["tags"]
    h.err("open_note", {"note_id": "N-1"}, code="note_not_found")


def test_create_note_in_notebook(h):
    r = h.ok("create_note_in_notebook", {"notebook_id": "NB-3", "title": "Shakshuka", "body": "Eggs, tomatoes.",
                                         "tags": ["breakfast", "breakfast"]})
    n = h.state()["notes"][r["note_id"]]
    assert n["notebook_id"] == "NB-3" and n["tags"] == ["breakfast"] and n["status"] == "active"
    h.err("create_note_in_notebook", {"notebook_id": "NB-3", "title": "shakshuka"}, code="duplicate_title")
    # archived titles do not count: "Groceries" is archived in NB-1
    h.ok("create_note_in_notebook", {"notebook_id": "NB-1", "title": "Groceries"})
    h.err("create_note_in_notebook", {"notebook_id": "NB-99", "title": "X"}, code="notebook_not_found")
    h.err("create_note_in_notebook", {"notebook_id": "NB-3", "title": "Tags", "tags": ["a", "b", "c", "d", "e", "f"]},
          code="too_many_tags")
    h.err("create_note_in_notebook", {"notebook_id": "NB-3", "title": "Bad tag", "tags": ["Not OK"]},
          kind="invalid_arguments")


def test_edit_note_content(h):
    r = h.ok("edit_note_content", {"note_id": "N-105", "body": "Eggs.", "append": True})
    assert r["body"].endswith("\nEggs.")
    h.ok("edit_note_content", {"note_id": "N-105", "title": "Weekly groceries", "body": "Only bread."})
    n = h.state()["notes"]["N-105"]
    assert n["title"] == "Weekly groceries" and n["body"] == "Only bread." and n["updated_on"] == "2025-03-10"
    h.err("edit_note_content", {"note_id": "N-105"}, code="nothing_to_change")
    h.err("edit_note_content", {"note_id": "N-106", "title": "weekly groceries"}, code="duplicate_title")
    archived = _note_titled(h, "Old gym plan", "archived")
    h.err("edit_note_content", {"note_id": archived, "body": "x"}, code="note_archived")
    h.err("edit_note_content", {"note_id": "N-0", "body": "x"}, code="note_not_found")
    h.err("edit_note_content", {"note_id": "N-105", "title": ""}, kind="invalid_arguments")


def test_retag_note(h):
    r = h.ok("retag_note", {"note_id": "N-103", "add_tags": ["urgent"], "remove_tags": ["hiring"]})
    assert r["tags"] == ["planning", "urgent"]
    assert h.state()["notes"]["N-103"]["tags"] == ["planning", "urgent"]
    h.err("retag_note", {"note_id": "N-103", "remove_tags": ["hiring"]}, code="tag_not_on_note")
    h.err("retag_note", {"note_id": "N-103", "add_tags": ["a", "b", "c", "d"]}, code="too_many_tags")
    archived = _note_titled(h, "Old gym plan", "archived")
    h.err("retag_note", {"note_id": archived, "add_tags": ["x"]}, code="note_archived")
    h.err("retag_note", {"note_id": "N-9", "add_tags": ["x"]}, code="note_not_found")
    h.err("retag_note", {"note_id": "N-103", "add_tags": ["UPPER"]}, kind="invalid_arguments")


def test_search_notes_by_text(h):
    r = h.ok("search_notes_by_text", {"query": "BASIL"})
    assert {x["note_id"] for x in r["results"]} == {"N-105", "N-110"}
    assert [x["note_id"] for x in h.ok("search_notes_by_text", {"query": "basil", "tag": "dinner"})["results"]] == ["N-110"]
    assert [x["note_id"] for x in h.ok("search_notes_by_text", {"query": "basil", "notebook_id": "NB-2"})["results"]] == ["N-105"]
    assert h.ok("search_notes_by_text", {"query": "snacks"})["results"] == []
    assert len(h.ok("search_notes_by_text", {"query": "snacks", "include_archived": True})["results"]) == 1
    h.err("search_notes_by_text", {"query": "basil", "notebook_id": "NB-7"}, code="notebook_not_found")
    h.err("search_notes_by_text", {"query": "b"}, kind="invalid_arguments")


def test_move_note_to_notebook(h):
    r = h.ok("move_note_to_notebook", {"note_id": "N-111", "notebook_id": "NB-2"})
    assert r["from_notebook_id"] == "NB-4"
    assert h.state()["notes"]["N-111"]["notebook_id"] == "NB-2"
    h.err("move_note_to_notebook", {"note_id": "N-111", "notebook_id": "NB-2"}, code="same_notebook")
    h.ok("create_note_in_notebook", {"notebook_id": "NB-1", "title": "Pesto"})
    h.err("move_note_to_notebook", {"note_id": "N-110", "notebook_id": "NB-1"}, code="duplicate_title")
    archived = _note_titled(h, "Old gym plan", "archived")
    h.err("move_note_to_notebook", {"note_id": archived, "notebook_id": "NB-1"}, code="note_archived")
    h.err("move_note_to_notebook", {"note_id": "N-110", "notebook_id": "NB-8"}, code="notebook_not_found")
    h.err("move_note_to_notebook", {"note_id": "N-404", "notebook_id": "NB-1"}, code="note_not_found")


def test_archive_notebook_note(h):
    h.ok("archive_notebook_note", {"note_id": "N-101"})
    n = h.state()["notes"]["N-101"]
    assert n["status"] == "archived" and n["pinned"] is False
    assert "N-101" not in [x["note_id"] for x in h.ok("list_notebook_notes", {"notebook_id": "NB-1"})["notes"]]
    h.err("archive_notebook_note", {"note_id": "N-101"}, code="already_archived")
    h.err("archive_notebook_note", {"note_id": "N-404"}, code="note_not_found")


def test_restore_archived_note(h):
    archived = _note_titled(h, "Old gym plan", "archived")
    r = h.ok("restore_archived_note", {"note_id": archived})
    assert r["status"] == "active" and h.state()["notes"][archived]["status"] == "active"
    h.err("restore_archived_note", {"note_id": archived}, code="not_archived")
    h.ok("archive_notebook_note", {"note_id": archived})
    h.ok("create_note_in_notebook", {"notebook_id": "NB-2", "title": "old gym plan"})
    h.err("restore_archived_note", {"note_id": archived}, code="duplicate_title")
    h.err("restore_archived_note", {"note_id": "N-404"}, code="note_not_found")
