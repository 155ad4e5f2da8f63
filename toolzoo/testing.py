"""A blocking harness for testing a domain's tools in a real sandbox.

    with DomainHarness("retail_orders") as h:
        order = h.ok("get_order", {"order_id": "O-1000"})
        err = h.err("cancel_order", {"order_id": "O-9999", "reason": "changed_mind"}, code="order_not_found")
        h.reset()   # back to the seeded state
"""

from __future__ import annotations

from typing import Any

from sandboxes import SandboxConfig, SyncSandbox, ToolError, ToolResult
from toolzoo.runtime import FailureConfig, bundle
from toolzoo.spec import Domain, ToolSpec


class DomainHarness:
    def __init__(
        self,
        domain: Domain | str,
        *,
        seed: int = 0,
        tools: list[ToolSpec] | None = None,
        failures: FailureConfig | None = None,
        config: SandboxConfig | None = None,
    ):
        if isinstance(domain, str):
            from toolzoo.domains import load_domain

            domain = load_domain(domain)
        self.domain = domain
        self.sandbox = SyncSandbox(config or SandboxConfig(backend="auto"))
        try:
            self.tool_names = self.sandbox.load_domain(bundle(domain, seed=seed, tools=tools, failures=failures))
        except BaseException:
            self.sandbox.close()
            raise

    def __enter__(self) -> DomainHarness:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.sandbox.close()

    def call(self, name: str, args: dict[str, Any] | None = None) -> ToolResult | ToolError:
        return self.sandbox.call_tool(name, args or {})

    def ok(self, name: str, args: dict[str, Any] | None = None) -> Any:
        r = self.call(name, args)
        if not r.ok:
            raise AssertionError(f"{name}({args}) failed: {r.kind} {r.code}: {r.message}")
        return r.output

    def err(self, name: str, args: dict[str, Any] | None = None, *, code: str | None = None, kind: str | None = None) -> ToolError:
        r = self.call(name, args)
        if r.ok:
            raise AssertionError(f"{name}({args}) succeeded but should have failed: {r.output}")
        if code is not None and r.code != code:
            raise AssertionError(f"{name}({args}): expected error code {code!r}, got {r.kind} {r.code!r}: {r.message}")
        if kind is not None and r.kind != kind:
            raise AssertionError(f"{name}({args}): expected {kind}, got {r.kind}: {r.message}")
        return r

    def state(self) -> Any:
        return self.sandbox.snapshot().state

    def reset(self) -> None:
        self.sandbox.reset()
