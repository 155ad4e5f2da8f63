from typing import Annotated

from toolzoo.dsl import ToolFailure, tool

Tag = Annotated[str, {"pattern": "^[a-z0-9][a-z0-9-]{0,23}$"}]
Title = Annotated[str, {"minLength": 1, "maxLength": 100}]


def _nt_note(state, note_id):
    if note_id not in state["notes"]:
        raise ToolFailure("note_not_found", f"no note {note_id}; search for it with search_notes_by_text")
    return state["notes"][note_id]


def _nt_notebook(state, notebook_id):
    if notebook_id not in state["notebooks"]:
        raise ToolFailure("notebook_not_found", f"no notebook {notebook_id}; use list_notebooks")
    return state["notebooks"][notebook_id]


def _nt_active(note, what):
    if note["status"] != "active":
        raise ToolFailure("note_archived", f"the note is archived; restore it with restore_archived_note before you {what}")


def _nt_title_taken(state, notebook_id, title, skip=None):
    for nid, n in sorted(state["notes"].items()):
        if nid != skip and n["notebook_id"] == notebook_id and n["status"] == "active" \
                and n["title"].strip().lower() == title.strip().lower():
            return nid
    return None


def _nt_row(nid, n):
    return {"note_id": nid, "title": n["title"], "notebook_id": n["notebook_id"], "tags": n["tags"],
            "pinned": n["pinned"], "status": n["status"], "updated_on": n["updated_on"]}


@tool()
def list_notebooks(state) -> dict:
    """List all notebooks with how many active and archived notes each holds."""
    out = []
    for nbid, nb in sorted(state["notebooks"].items()):
        notes = [n for n in state["notes"].values() if n["notebook_id"] == nbid]
        out.append({"notebook_id": nbid, "name": nb["name"],
                    "active_notes": sum(n["status"] == "active" for n in notes),
                    "archived_notes": sum(n["status"] == "archived" for n in notes)})
    return {"notebooks": out}


@tool(effect="write", errors={"duplicate_notebook_name": "a notebook with this name exists"})
def create_notebook(state, name: Annotated[str, {"minLength": 1, "maxLength": 60}]) -> dict:
    """Create a new, empty notebook.

    Args:
        name: the notebook name; must differ (case-insensitively) from existing notebooks.
    """
    for nbid, nb in sorted(state["notebooks"].items()):
        if nb["name"].lower() == name.strip().lower():
            raise ToolFailure("duplicate_notebook_name", f"notebook {nbid} is already called {nb['name']!r}; use it")
    nbid = f"NB-{max(int(k[3:]) for k in state['notebooks']) + 1}"
    state["notebooks"][nbid] = {"name": name.strip(), "created_on": state["today"]}
    return {"notebook_id": nbid, "name": name.strip()}


@tool(errors={"notebook_not_found": "unknown notebook id"})
def list_notebook_notes(state, notebook_id: str, include_archived: bool = False) -> dict:
    """List the notes of a notebook, pinned ones first, without their bodies.

    Args:
        notebook_id: the notebook, e.g. "NB-1".
        include_archived: also list archived notes.
    """
    nb = _nt_notebook(state, notebook_id)
    rows = [_nt_row(nid, n) for nid, n in sorted(state["notes"].items())
            if n["notebook_id"] == notebook_id and (include_archived or n["status"] == "active")]
    rows.sort(key=lambda r: (not r["pinned"], r["note_id"]))
    return {"notebook_id": notebook_id, "name": nb["name"], "notes": rows}


@tool(errors={"note_not_found": "unknown note id"})
def open_note(state, note_id: str) -> dict:
    """Show a note in full: title, body, tags, notebook and status.

    Args:
        note_id: the note, e.g. "N-101".
    """
    return {"note_id": note_id, **_nt_note(state, note_id)}


@tool(effect="write", errors={
    "notebook_not_found": "unknown notebook id",
    "duplicate_title": "an active note in the notebook already has this title",
    "too_many_tags": "more than the allowed tags per note",
})
def create_note_in_notebook(state, notebook_id: str, title: Title, body: str = "", tags: list[Tag] | None = None) -> dict:
    """Create a note in a notebook.

    Args:
        notebook_id: the notebook, e.g. "NB-2".
        title: the title, unique among the notebook's active notes.
        body: the note text.
        tags: lowercase tags like ["shopping", "q2"]; at most 5.
    """
    _nt_notebook(state, notebook_id)
    clash = _nt_title_taken(state, notebook_id, title)
    if clash:
        raise ToolFailure("duplicate_title", f"{clash} in {notebook_id} already has the title {title!r}; pick another")
    tags = list(dict.fromkeys(tags or []))
    if len(tags) > state["max_tags_per_note"]:
        raise ToolFailure("too_many_tags", f"a note can have at most {state['max_tags_per_note']} tags")
    nid = f"N-{max(int(k[2:]) for k in state['notes']) + 1}"
    state["notes"][nid] = {"notebook_id": notebook_id, "title": title.strip(), "body": body, "tags": tags,
                           "pinned": False, "status": "active", "updated_on": state["today"]}
    return {"note_id": nid, "notebook_id": notebook_id, "title": title.strip()}


@tool(effect="write", errors={
    "note_not_found": "unknown note id",
    "note_archived": "archived notes are read-only",
    "nothing_to_change": "neither a new title nor body text was given",
    "duplicate_title": "another active note in the notebook has the new title",
})
def edit_note_content(state, note_id: str, title: Annotated[str | None, {"minLength": 1, "maxLength": 100}] = None, body: str | None = None,
                      append: bool = False) -> dict:
    """Change a note's title and/or body; the body can be replaced or appended to.

    Args:
        note_id: the note to edit.
        title: the new title, or null to keep it.
        body: the new body text (or the text to append), or null to keep it.
        append: if true, add `body` on a new line after the existing text instead of replacing it.
    """
    n = _nt_note(state, note_id)
    _nt_active(n, "edit it")
    if title is None and body is None:
        raise ToolFailure("nothing_to_change", "give a new title, body text, or both")
    if title is not None:
        clash = _nt_title_taken(state, n["notebook_id"], title, skip=note_id)
        if clash:
            raise ToolFailure("duplicate_title", f"{clash} already has the title {title!r} in {n['notebook_id']}")
        n["title"] = title.strip()
    if body is not None:
        n["body"] = (n["body"] + "\n" + body) if append and n["body"] else body
    n["updated_on"] = state["today"]
    return {"note_id": note_id, "title": n["title"], "body": n["body"]}


@tool(effect="write", errors={
    "note_not_found": "unknown note id",
    "note_archived": "archived notes are read-only",
    "tag_not_on_note": "a tag to remove is not on the note",
    "too_many_tags": "the note would have more than the allowed tags",
})
def retag_note(state, note_id: str, add_tags: list[Tag] | None = None, remove_tags: list[Tag] | None = None) -> dict:
    """Add and/or remove tags on a note (removals happen first).

    Args:
        note_id: the note.
        add_tags: tags to add, e.g. ["urgent"]; tags already present are ignored.
        remove_tags: tags to remove; each must be on the note.
    """
    n = _nt_note(state, note_id)
    _nt_active(n, "retag it")
    tags = list(n["tags"])
    for t in remove_tags or []:
        if t not in tags:
            raise ToolFailure("tag_not_on_note", f"{note_id} has no tag {t!r}; its tags are {tags}")
        tags.remove(t)
    for t in add_tags or []:
        if t not in tags:
            tags.append(t)
    if len(tags) > state["max_tags_per_note"]:
        raise ToolFailure("too_many_tags",
                          f"{note_id} would have {len(tags)} tags; the limit is {state['max_tags_per_note']}, remove some")
    n["tags"] = tags
    n["updated_on"] = state["today"]
    return {"note_id": note_id, "tags": tags}


@tool(errors={"notebook_not_found": "unknown notebook id"})
def search_notes_by_text(state, query: Annotated[str, {"minLength": 2}], tag: Annotated[str | None, {"pattern": "^[a-z0-9][a-z0-9-]{0,23}$"}] = None,
                         notebook_id: str | None = None, include_archived: bool = False) -> dict:
    """Search notes whose title or body contains the text (case-insensitive), optionally filtered.

    Args:
        query: the text to look for (at least 2 characters).
        tag: only notes with this tag.
        notebook_id: only notes in this notebook.
        include_archived: also search archived notes.
    """
    if notebook_id is not None:
        _nt_notebook(state, notebook_id)
    q = query.strip().lower()
    hits = []
    for nid, n in sorted(state["notes"].items()):
        if not include_archived and n["status"] != "active":
            continue
        if notebook_id is not None and n["notebook_id"] != notebook_id:
            continue
        if tag is not None and tag not in n["tags"]:
            continue
        if q in n["title"].lower() or q in n["body"].lower():
            hits.append(_nt_row(nid, n))
    return {"query": query, "results": hits}


@tool(effect="write", errors={
    "note_not_found": "unknown note id",
    "notebook_not_found": "unknown notebook id",
    "note_archived": "archived notes cannot be moved",
    "same_notebook": "the note is already in that notebook",
    "duplicate_title": "the target notebook already has an active note with this title",
})
def move_note_to_notebook(state, note_id: str, notebook_id: str) -> dict:
    """Move a note into another notebook.

    Args:
        note_id: the note to move.
        notebook_id: the target notebook.
    """
    n = _nt_note(state, note_id)
    _nt_notebook(state, notebook_id)
    _nt_active(n, "move it")
    if n["notebook_id"] == notebook_id:
        raise ToolFailure("same_notebook", f"{note_id} is already in {notebook_id}")
    clash = _nt_title_taken(state, notebook_id, n["title"])
    if clash:
        raise ToolFailure("duplicate_title",
                          f"{notebook_id} already has {clash} titled {n['title']!r}; rename one of them first")
    old = n["notebook_id"]
    n["notebook_id"] = notebook_id
    n["updated_on"] = state["today"]
    return {"note_id": note_id, "from_notebook_id": old, "notebook_id": notebook_id}


@tool(effect="write", errors={"note_not_found": "unknown note id", "already_archived": "the note is already archived"})
def archive_notebook_note(state, note_id: str) -> dict:
    """Archive a note: it leaves lists and searches, becomes read-only, and is unpinned.

    Args:
        note_id: the note to archive.
    """
    n = _nt_note(state, note_id)
    if n["status"] == "archived":
        raise ToolFailure("already_archived", f"{note_id} is already archived")
    n.update(status="archived", pinned=False, updated_on=state["today"])
    return {"note_id": note_id, "status": "archived"}


@tool(effect="write", errors={
    "note_not_found": "unknown note id",
    "not_archived": "the note is not archived",
    "duplicate_title": "an active note in the same notebook now has this title",
})
def restore_archived_note(state, note_id: str) -> dict:
    """Restore an archived note to active, in the notebook it was archived from.

    Args:
        note_id: the archived note.
    """
    n = _nt_note(state, note_id)
    if n["status"] != "archived":
        raise ToolFailure("not_archived", f"{note_id} is {n['status']}, not archived")
    clash = _nt_title_taken(state, n["notebook_id"], n["title"])
    if clash:
        raise ToolFailure("duplicate_title",
                          f"{clash} in {n['notebook_id']} is already titled {n['title']!r}; rename it before restoring")
    n.update(status="active", updated_on=state["today"])
    return {"note_id": note_id, "status": "active", "notebook_id": n["notebook_id"]}
