import random

VFS_SNIPPETS = ["Quarterly numbers look fine.", "TODO: call the plumber.", "def main():\n    print('hi')\n",
                "Dear team, the offsite is moved.", "lorem ipsum dolor sit amet ", "# notes\n- buy milk\n- fix bike\n"]
VFS_LAYOUT = {
    "/home/docs": ["report.txt", "budget.csv", "letter.md"],
    "/home/photos": ["beach.jpg", "cat.png"],
    "/home/projects/site": ["index.html", "style.css"],
    "/home/projects": ["ideas.md"],
    "/system": ["config.ini", "hosts"],
}


def seed(rng: random.Random) -> dict:
    dirs = ["/", "/home", "/home/docs", "/home/photos", "/home/projects", "/home/projects/site", "/system"]
    files = {}
    for d, names in VFS_LAYOUT.items():
        for name in names:
            content = rng.choice(VFS_SNIPPETS) * rng.randint(1, 6)
            files[f"{d}/{name}"] = {"content": content, "size": len(content.encode("utf-8")),
                                    "modified": f"2024-0{rng.randint(1, 5)}-{rng.randint(10, 28)}T10:00",
                                    "readonly": d == "/system"}
    old = rng.choice(VFS_SNIPPETS) * rng.randint(1, 4)
    trash = {"T-1": {"original_path": "/home/docs/old_draft.txt", "type": "file", "deleted_at": "2024-06-01T12:00",
                     "dirs": [], "files": {"/home/docs/old_draft.txt": {"content": old, "size": len(old.encode("utf-8")),
                                                                        "modified": "2024-05-30T09:00", "readonly": False}},
                     "size": len(old.encode("utf-8"))}}
    used = sum(f["size"] for f in files.values()) + trash["T-1"]["size"]
    return {"now": "2024-06-10T09:00", "quota_bytes": used + rng.randint(4, 12) * 100,
            "protected": ["/", "/home", "/system"], "dirs": dirs, "files": files, "trash": trash, "next_trash": 2}
