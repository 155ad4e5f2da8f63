"""A personal notes app: notebooks, notes with tags, full-text search, moving between notebooks, archive and restore."""

CATEGORY = "software_apps"
DESCRIPTION = ("A notes app like Evernote or Notion-lite: notebooks, notes, tags, search, "
               "moving notes between notebooks, archiving and restoring.")
FAILURE_MODES = [
    {"kind": "timeout", "tools": ["move_note_to_notebook", "edit_note_content"],
     "message": "sync with the notes server timed out; nothing changed, retry"},
    {"kind": "rate_limit", "tools": ["*"]},
    {"kind": "partial", "tools": ["search_notes_by_text", "list_notebook_notes"]},
]
