"""Run zoo tools where they belong: inside a sandbox's tool server.

`bundle()` turns a domain (plus any evolved tools) into one stdlib-only Python
source — the DSL runtime, the domain's data and tool code, then a footer that
seeds the state and wraps every tool with schema validation and failure
injection. `ToolRuntime` loads it into a sandbox and routes calls; MCP tools go
to their own server instead (toolzoo.mcp).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from sandboxes import DomainBundle, Sandbox, ToolError, ToolResult
from toolzoo.domain_dirs import initial_state
from toolzoo.spec import Domain, ToolSpec

DSL_SOURCE = (Path(__file__).parent / "dsl.py").read_text()
_LOCAL_IMPORT = re.compile(r"^\s*from\s+(toolzoo\.dsl|\.\w*|__future__)\s+import\s+.*$", re.MULTILINE)

# The DSL runs in its own namespace so that no name in a domain's code can
# replace the validator or the failure injector; its public names are then
# copied in for the domain code to use.
HEADER = """# ---- tooldojo bundle header ----
_dsl = {{"ToolFailure": ToolFailure, "InvalidArguments": InvalidArguments, "__name__": "toolzoo_dsl"}}
exec(compile({dsl!r}, "toolzoo/dsl.py", "exec"), _dsl)
globals().update({{k: v for k, v in _dsl.items() if not k.startswith("_")}})
"""

FOOTER = """

# ---- tooldojo bundle footer ----
import json as _json, random as _random
_SPECS = _json.loads({specs!r})
SEED = {seed!r}
INITIAL_STATE = seed(_random.Random(SEED)) if "seed" in globals() else {{}}  # a data-file domain ships its state
TOOLS = _dsl["build_tools"](globals(), _SPECS, _json.loads({modes!r}), {rate!r}, {failure_seed!r})
"""


class FailureConfig(BaseModel):
    """Switch a domain's declared failure modes on, at `rate` per matching call."""

    rate: float = Field(0.0, ge=0.0, le=1.0)
    seed: int = 0


def strip_local_imports(source: str) -> str:
    """Domain files import the DSL and each other; in a bundle everything shares one namespace."""
    return _LOCAL_IMPORT.sub("", source)


def bundle(
    domain: Domain,
    *,
    seed: int = 0,
    tools: Sequence[ToolSpec] | None = None,
    failures: FailureConfig | None = None,
) -> DomainBundle:
    specs = list(tools) if tools is not None else list(domain.tools)
    extra = [t.implementation for t in specs if t.implementation]
    spec_json = json.dumps([
        {"name": t.name, "function": t.function, "parameters": t.parameters, "description": t.description,
         "effect": t.effect}
        for t in specs
    ])
    modes = json.dumps([m.model_dump() for m in domain.failure_modes])
    f = failures or FailureConfig()
    header = HEADER.format(dsl=DSL_SOURCE)
    source = "\n\n".join([header, strip_local_imports(domain.source), *extra]) + FOOTER.format(
        specs=spec_json, seed=seed, modes=modes, rate=f.rate, failure_seed=f.seed
    )
    return DomainBundle(name=domain.name, source=source, state=initial_state(domain))


class ToolRuntime:
    """The tools of one episode: zoo tools in `sandbox`, MCP tools through `mcp_call`."""

    def __init__(
        self,
        sandbox: Sandbox,
        domain: Domain,
        *,
        tools: Sequence[ToolSpec] | None = None,
        seed: int = 0,
        failures: FailureConfig | None = None,
        external: Sequence[ToolSpec] = (),
        mcp_call: Callable[[ToolSpec, dict[str, Any]], Awaitable[ToolResult | ToolError]] | None = None,
    ):
        self.sandbox = sandbox
        self.domain = domain
        self.tools = list(tools) if tools is not None else list(domain.tools)
        self.external = {t.name: t for t in external}
        self.seed = seed
        self.failures = failures
        self._mcp_call = mcp_call
        self._loaded = False

    async def load(self) -> list[str]:
        names = await self.sandbox.load_domain(bundle(self.domain, seed=self.seed, tools=self.tools, failures=self.failures))
        self._loaded = True
        return names

    def specs(self) -> list[ToolSpec]:
        return self.tools + list(self.external.values())

    def openai_tools(self) -> list[dict[str, Any]]:
        return [t.to_openai() for t in self.specs()]

    async def call(self, name: str, args: dict[str, Any] | None = None, *, timeout: float | None = 10.0) -> ToolResult | ToolError:
        if name in self.external:
            if self._mcp_call is None:
                return ToolError(name=name, kind="internal_error", message=f"{name} is an MCP tool but no MCP client is connected")
            return await self._mcp_call(self.external[name], args or {})
        if not self._loaded:
            await self.load()
        return await self.sandbox.call_tool(name, args or {}, timeout=timeout)
