"""Who owns a sandbox: the process that started it, so a reaper can tell orphans.

A pid alone can be reused after its process dies, so we also record the
process's start time (from /proc) and the host name.
"""

from __future__ import annotations

import os
import socket

PID_LABEL = "tooldojo.owner_pid"
START_LABEL = "tooldojo.owner_start"
HOST_LABEL = "tooldojo.owner_host"


def process_start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 22 (starttime); the command name in field 2 may contain spaces.
    return stat.rsplit(")", 1)[1].split()[19]


def labels() -> dict[str, str]:
    pid = os.getpid()  # after a fork the child is the owner
    return {PID_LABEL: str(pid), START_LABEL: process_start_time(pid) or "", HOST_LABEL: socket.gethostname()}


def is_alive(lbls: dict[str, str]) -> bool:
    """True if the owner recorded in `lbls` is still running (or lives on another host)."""
    if lbls.get(HOST_LABEL) not in (None, "", socket.gethostname()):
        return True  # not ours to judge
    try:
        pid = int(lbls.get(PID_LABEL, ""))
    except ValueError:
        return False
    start = process_start_time(pid)
    return start is not None and start == lbls.get(START_LABEL, start)
