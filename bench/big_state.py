"""Benchmark tool calls on a big fixed database: copy on write and the kept state digest.

    python bench/big_state.py [--quick] [--backend auto|docker|local] [--calls N] [--mb 1.2]

A synthetic out-of-tree domain (a folder with tools.py and a data.json of about --mb megabytes:
users, products and orders keyed by id, like tau-bench's retail database) is loaded by path into
one warm sandbox, and each tool is called --calls times after a warm-up:

* big_read_p50_ms / big_write_p50_ms: `get_order` / `set_order_note` (looks an order up by id and
  changes one field) through the tool server, as an episode calls them;
* big_digest_p50_ms: `Sandbox.digest()` right after a write (what an episode records per call),
  big_snapshot_digest_p50_ms: the old way, `snapshot().digest` (the whole state sent and hashed);
* legacy_big_read_p50_ms / legacy_big_write_p50_ms: the same calls with the deep copy per call that
  every tool got before (the tools' copy-on-write hooks removed in the same bundle);
* small_*: the same tools over a 40-order database of the same shape (the small-domain baseline).

The targets (issue 24): a read <= 1 ms and a write <= 5 ms p50 on the >= 1 MB database. The LAST
line on stdout is one JSON object (milliseconds unless the key says otherwise).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (first: fixes sys.path)
from rich.console import Console

console = Console(stderr=True, highlight=False)

TOOLS = '''
from toolzoo.dsl import ToolFailure, tool


@tool(errors={"order_not_found": "no such order"})
def get_order(data, order_id: str) -> dict:
    """Show an order.

    Args:
        order_id: the order's id, e.g. "#W0000001".
    """
    if order_id not in data["orders"]:
        raise ToolFailure("order_not_found", f"no order {order_id}")
    return data["orders"][order_id]


@tool(effect="write", errors={"order_not_found": "no such order"})
def set_order_note(data, order_id: str, note: str) -> dict:
    """Set an order's note.

    Args:
        order_id: the order's id.
        note: the new note.
    """
    if order_id not in data["orders"]:
        raise ToolFailure("order_not_found", f"no order {order_id}")
    order = data["orders"][order_id]
    order["note"] = note
    order["history"].append({"event": "note", "note": note})
    return {"order_id": order_id, "note": note}
'''

LEGACY = "\nfor _t in TOOLS:\n    del _t.begin, _t.commit  # the deep copy per call of before\n"


def database(orders: int) -> dict[str, Any]:
    users = {f"user_{i}": {"name": {"first": f"First{i}", "last": f"Last{i}"}, "email": f"user{i}@example.com",
                           "address": {"address1": f"{i} Main St", "city": "Austin", "state": "TX", "zip": "78701"},
                           "payment_methods": {f"card_{i}": {"source": "credit_card", "last_four": f"{i % 10000:04d}"}},
                           "orders": []} for i in range(max(4, orders // 3))}
    products = {f"p{i}": {"name": f"product {i}", "variants": {f"v{i}_{j}": {"price": 10.0 + j, "available": True,
                                                                             "options": {"size": "M", "color": "red"}}
                                                               for j in range(4)}} for i in range(max(2, orders // 20))}
    out = {}
    for i in range(orders):
        uid = f"user_{i % len(users)}"
        oid = f"#W{i:07d}"
        users[uid]["orders"].append(oid)
        out[oid] = {"user_id": uid, "status": "pending", "note": "",
                    "items": [{"product_id": f"p{(i + k) % len(products)}", "item_id": f"v{k}", "price": 10.0 + k,
                               "options": {"size": "M", "color": "red"}} for k in range(2)],
                    "payment_history": [{"transaction_type": "payment", "amount": 21.0, "payment_method_id": "card"}],
                    "history": []}
    return {"users": users, "products": products, "orders": out}


def write_domain(root: Path, name: str, orders: int, at_least: float = 0) -> tuple[Path, int, int]:
    """The domain folder, its data.json's size and the orders in it (grown to `at_least` bytes)."""
    blob = json.dumps(database(orders))
    while len(blob.encode()) < at_least:
        orders = int(orders * 1.1) + 1
        blob = json.dumps(database(orders))
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "tools.py").write_text(TOOLS)
    (folder / "policy.md").write_text("Answer questions about orders.")
    (folder / "data.json").write_text(blob)
    return folder, len(blob.encode()), orders


def pct(samples: list[float], q: int) -> float | None:
    if not samples:
        return None
    if len(samples) == 1:
        return round(samples[0] * 1000, 3)
    return round(statistics.quantiles(samples, n=100, method="inclusive")[q - 1] * 1000, 3)


async def measure(backend: str, folder: Path, calls: int, warmup: int, prefix: str, *,
                  legacy: bool = False, digests: bool = False) -> dict[str, Any]:
    from sandboxes import DomainBundle, SandboxConfig, open_sandbox
    from toolzoo.domains import load_domain
    from toolzoo.runtime import bundle

    domain = load_domain(str(folder))
    b = bundle(domain)
    if legacy:
        b = DomainBundle(name=b.name, source=b.source + LEGACY, state=b.state)
    oid = next(iter(b.state["orders"]))
    out: dict[str, Any] = {}
    async with await open_sandbox(SandboxConfig(backend=backend)) as sb:  # type: ignore[arg-type]
        t0 = time.perf_counter()
        await sb.load_domain(b)
        out[f"{prefix}_load_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        out["sandbox_backend"] = sb.backend

        async def timed(fn: Any, n: int) -> list[float]:
            samples = []
            for i in range(warmup + n):
                s = time.perf_counter()
                r = await fn(i)
                if getattr(r, "ok", True) is False:
                    raise RuntimeError(f"{r.name} failed: {r.kind}: {r.message}")
                if i >= warmup:
                    samples.append(time.perf_counter() - s)
            return samples

        read = await timed(lambda i: sb.call_tool("get_order", {"order_id": oid}), calls)
        write = await timed(lambda i: sb.call_tool("set_order_note", {"order_id": oid, "note": f"n{i % 3}"}), calls)
        out[f"{prefix}_read_p50_ms"], out[f"{prefix}_read_p95_ms"] = pct(read, 50), pct(read, 95)
        out[f"{prefix}_write_p50_ms"], out[f"{prefix}_write_p95_ms"] = pct(write, 50), pct(write, 95)
        if digests:
            async def write_then(fn: Any) -> list[float]:
                samples = []
                for i in range(warmup + max(5, calls // 4)):
                    await sb.call_tool("set_order_note", {"order_id": oid, "note": f"d{i}"})
                    s = time.perf_counter()
                    await fn()
                    if i >= warmup:
                        samples.append(time.perf_counter() - s)
                return samples

            new = await write_then(sb.digest)
            old = await write_then(sb.snapshot)
            out[f"{prefix}_digest_p50_ms"] = pct(new, 50)
            out[f"{prefix}_snapshot_digest_p50_ms"] = pct(old, 50)
            if await sb.digest() != (await sb.snapshot()).digest:
                raise RuntimeError("the kept digest differs from the snapshot's")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer calls (CI smoke)")
    ap.add_argument("--backend", default="auto", help="auto | docker | local")
    ap.add_argument("--calls", type=int, default=None)
    ap.add_argument("--mb", type=float, default=1.2, help="size of the big database")
    args = ap.parse_args()
    import anyio

    from sandboxes.backends import resolve_backend

    backend, why = resolve_backend(args.backend)
    calls = args.calls or (20 if args.quick else 200)
    warmup = 3 if args.quick else 20
    result: dict[str, Any] = {"backend": backend, "quick": args.quick, "calls": calls}
    console.print(f"[bold]big-state bench[/] backend={backend} ({why}) calls={calls}")
    phase = _common.phase_runner(result, console, spinner=True)
    with tempfile.TemporaryDirectory(prefix="tooldojo-bigstate-") as tmp:
        root = Path(tmp)
        big, size, orders = write_domain(root, "bench_big_orders", max(40, int(args.mb * 1_000_000 / 900)),
                                         at_least=args.mb * 1_000_000)
        small, small_size, _ = write_domain(root, "bench_small_orders", 40)
        result.update({"big_db_bytes": size, "big_orders": orders, "small_db_bytes": small_size})
        phase("small", lambda: anyio.run(lambda: measure(backend, small, calls, warmup, "small")),
              ("small_read_p50_ms", "small_write_p50_ms"))
        phase("big", lambda: anyio.run(lambda: measure(backend, big, calls, warmup, "big", digests=True)),
              ("big_read_p50_ms", "big_write_p50_ms", "big_digest_p50_ms", "big_snapshot_digest_p50_ms"))
        phase("legacy", lambda: anyio.run(lambda: measure(backend, big, max(5, calls // 4), warmup, "legacy_big",
                                                          legacy=True)),
              ("legacy_big_read_p50_ms", "legacy_big_write_p50_ms"))
    r, w = result.get("big_read_p50_ms"), result.get("big_write_p50_ms")
    result["meets_targets"] = None if r is None or w is None else bool(r <= 1.0 and w <= 5.0)
    _common.emit(result, head=("backend", "quick", "big_db_bytes", "big_read_p50_ms", "big_write_p50_ms",
                               "small_read_p50_ms", "small_write_p50_ms", "meets_targets"))
    sys.exit(1 if result.get("errors") else 0)


if __name__ == "__main__":
    main()
