"""The names the model sees for imported MCP tools.

MCP allows any tool name (`kv.set`, `inv.add-items`, `get-weather`); a model's
function names must match `^[a-zA-Z0-9_-]{1,64}$` (OpenAI's rule). The rule:

* a name that already matches is kept as is (`get-weather`);
* otherwise every character outside `[a-zA-Z0-9_-]` becomes `_` (`kv.set` -> `kv_set`);
* a made name that is over 64 characters, or that another tool of the server
  has or would be given too, ends in `_` and 8 hex digits of the SHA-256 of the
  server's name instead (`kv.set` -> `kv_set_ee611967` when the server also has `kv_set`;
  a name the server gave itself is never changed).

A name depends only on the server's tool names, not their order, so importing
the same server again gives the same names. The server's own name is kept in
`ToolSpec.mcp_name` and used for the call.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence

from toolzoo.spec import MODEL_NAME_RE

MAX_LEN = 64
_BAD_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def _hashed(name: str, base: str) -> str:
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{base[:MAX_LEN - 9]}_{digest}"


def model_names(names: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    """({server name: model name}, {server name: why it was skipped}) for one server's tool names.

    A tool is skipped when it has no name or its name is listed twice (a call could not tell them apart).
    """
    counts = Counter(names)
    skipped = {n: ("the server gave it no name" if not n else "the server lists this name more than once")
               for n in counts if not n or counts[n] > 1}
    kept = [n for n in counts if n not in skipped]
    valid = {n for n in kept if MODEL_NAME_RE.match(n)}
    made = {n: _BAD_CHARS.sub("_", n) for n in kept if n not in valid}
    made_counts = Counter(made.values())
    out = {n: n for n in valid}
    for n, m in made.items():
        out[n] = m if len(m) <= MAX_LEN and m not in valid and made_counts[m] == 1 else _hashed(n, m)
    taken = Counter(out.values())
    for n in [n for n, m in out.items() if taken[m] > 1 and n not in valid]:  # a hash that still clashes: never seen
        skipped[n] = f"its model name {out.pop(n)!r} clashes with another tool's"
    return out, skipped
