"""Contracts of the tool zoo: ToolSpec, Domain, Category, Zoo."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sandboxes.cli_files import read_text, validation_reason

Provenance = Literal["seed", "evolved", "mcp", "llm"]
Effect = Literal["read", "write"]
NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")  # zoo tools: also a Python identifier in the sandbox
MODEL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # what OpenAI accepts as a function name; imported MCP tools


class SpecError(ValueError):
    """A tool or domain definition is invalid; the message names the tool and the problem."""


def check_json_schema(schema: Any, where: str) -> None:
    """Raise SpecError unless `schema` is a valid JSON Schema (Draft 2020-12)."""
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        path = "/".join(str(p) for p in e.absolute_path) or "(root)"
        raise SpecError(f"{where}: invalid JSON Schema at {path}: {e.message}") from None


ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ENV_REF_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class McpSource(BaseModel):
    """Where an imported MCP tool lives: a stdio command or a streamable-HTTP URL.

    `env` sets environment variables of a stdio server (on top of the MCP SDK's safe default
    environment; the caller's own environment does not reach the server). A value may refer to
    the caller's variables as `${NAME}`, substituted when the server starts: keep secrets there,
    so a saved zoo holds `{"API_KEY": "${API_KEY}"}`, never the key. `env` is left out of reprs.
    """

    model_config = ConfigDict(frozen=True)

    command: list[str] | None = None
    url: str | None = None
    server_name: str = ""
    env: dict[str, str] = Field(default_factory=dict, repr=False,
                                description="stdio server environment; ${NAME} takes NAME from the caller's")

    @model_validator(mode="after")
    def _one(self) -> McpSource:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of command (stdio) or url (streamable HTTP)")
        if self.env and self.command is None:
            raise ValueError("env is for stdio servers (command); an HTTP server has its own environment")
        bad = [k for k in self.env if not ENV_NAME_RE.match(k)]
        if bad:
            raise ValueError(f"env: {', '.join(map(repr, bad))} is not an environment variable name")
        return self


class ToolSpec(BaseModel):
    """A tool: its interface (OpenAI function / MCP tool) and, for zoo tools, executable semantics."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    returns: dict[str, Any] | None = None
    errors: dict[str, str] = Field(default_factory=dict, description="declared error code -> meaning")
    effect: Effect = "read"
    category: str = "unknown"
    domain: str = "unknown"
    provenance: Provenance = "seed"
    function: str | None = Field(None, description="name of the implementing function in the domain source")
    implementation: str | None = Field(None, description="source of the function, for tools not in a domain file")
    parents: list[str] = Field(default_factory=list, description="tools this one was evolved from")
    operator: str | None = Field(None, description="the evolution operator that made it")
    mcp: McpSource | None = None
    mcp_name: str | None = Field(None, description="an imported MCP tool's name on its server, used to call it "
                                 "(`name` is the one the model sees; toolzoo.mcp_names says how it is made)")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not MODEL_NAME_RE.match(v):
            raise ValueError(f"tool name {v!r} must match {MODEL_NAME_RE.pattern} (OpenAI function names)")
        return v

    @property
    def call_name(self) -> str:
        """The name to call the tool by: the MCP server's own for an imported tool, else `name`."""
        return self.mcp_name if self.mcp_name is not None else self.name

    @field_validator("description")
    @classmethod
    def _description(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("a tool needs a description the agent can read")
        return v

    @model_validator(mode="after")
    def _schemas(self) -> ToolSpec:
        if self.provenance != "mcp" and not NAME_RE.match(self.name):
            raise ValueError(f"tool name {self.name!r} must match {NAME_RE.pattern} (the rule for the zoo's own tools)")
        if self.mcp_name is not None and (self.provenance != "mcp" or not self.mcp_name):
            raise ValueError(f"{self.name}: mcp_name is the non-empty server-side name of an imported MCP tool")
        if self.parameters.get("type") != "object":
            raise ValueError(f"{self.name}: parameters must be a JSON Schema with type 'object'")
        check_json_schema(self.parameters, f"tool {self.name} parameters")
        if self.returns is not None:
            check_json_schema(self.returns, f"tool {self.name} returns")
        if self.provenance == "mcp" and self.mcp is None:
            raise ValueError(f"{self.name}: an mcp tool needs its mcp source")
        if self.provenance != "mcp" and self.function is None:
            raise ValueError(f"{self.name}: a zoo tool needs the name of its implementing function")
        return self

    # -------------------------------------------------------------- formats
    def to_openai(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}

    def to_mcp(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description, "inputSchema": self.parameters}
        if self.returns is not None and self.returns.get("type") == "object":
            out["outputSchema"] = self.returns
        out["annotations"] = {"readOnlyHint": self.effect == "read"}
        return out

    @classmethod
    def from_openai(cls, fn: dict[str, Any], **extra: Any) -> ToolSpec:
        f = fn.get("function", fn)
        return cls(name=f["name"], description=f.get("description") or f["name"],
                   parameters=f.get("parameters") or {"type": "object", "properties": {}}, **extra)

    @classmethod
    def from_mcp(cls, tool: dict[str, Any], source: McpSource, **extra: Any) -> ToolSpec:
        ann = tool.get("annotations") or {}
        return cls(
            name=tool["name"], description=tool.get("description") or tool["name"],
            parameters=tool.get("inputSchema") or {"type": "object", "properties": {}},
            returns=tool.get("outputSchema"), provenance="mcp", mcp=source,
            effect="read" if ann.get("readOnlyHint") else "write", **extra,
        )

    def signature_key(self) -> str:
        """Normalised signature for deduplication: name-free shape of the interface."""
        props = self.parameters.get("properties", {})
        shape = sorted((k.lower(), json.dumps(v.get("type")), json.dumps(sorted(v.get("enum", [])))) for k, v in props.items())
        return json.dumps([self.domain, self.effect, shape, sorted(self.parameters.get("required", []))])


class FailureMode(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["timeout", "rate_limit", "partial"]
    tools: list[str] = Field(default_factory=lambda: ["*"])
    message: str | None = None


class Category(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""


class McpStateHook(BaseModel):
    """How to read and reset an MCP server's world state: `tool:NAME` (called with no arguments) or
    `resource:URI`; the read result is the state (JSON), the reset puts the server back to its start."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    read: str
    reset: str | None = None

    @field_validator("read", "reset")
    @classmethod
    def _ref(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if ":" not in v:
            v = f"tool:{v}"
        kind, _, target = v.partition(":")
        if kind not in ("tool", "resource") or not target:
            raise ValueError(f"{v!r}: give tool:NAME or resource:URI")
        return v


class Domain(BaseModel):
    """A tau2-style domain: data (seed generator), tools, and the policy the agent must follow."""

    model_config = ConfigDict(extra="forbid")

    name: str
    category: str
    description: str
    policy: str
    source: str = Field(description="stdlib-only Python: seed(rng) -> state, and the tool functions")
    state_schema: dict[str, Any] = Field(default_factory=dict)
    tools: list[ToolSpec]
    failure_modes: list[FailureMode] = Field(default_factory=list)
    # Left out of dumps when unset, so a zoo's JSON (and what hashes it, e.g. rl.pretrain) is as before.
    data_file: str | None = Field(None, exclude_if=lambda v: v is None,
                                  description="a JSON/JSONL file holding the initial state (then no seed())")
    mcp_state: McpStateHook | None = Field(None, exclude_if=lambda v: v is None,
                                           description="an MCP domain's state read/reset hooks")

    @model_validator(mode="after")
    def _unique(self) -> Domain:
        seen: set[str] = set()
        for t in self.tools:
            if t.name in seen:
                raise ValueError(f"domain {self.name}: two tools are named {t.name!r}")
            seen.add(t.name)
            if t.domain != self.name:
                raise ValueError(f"tool {t.name} says domain {t.domain!r} but sits in {self.name!r}")
        return self

    def tool(self, name: str) -> ToolSpec:
        for t in self.tools:
            if t.name == name:
                return t
        raise KeyError(f"domain {self.name} has no tool {name!r}")


class Zoo(BaseModel):
    """A set of domains (with their tools) plus tools that live outside a domain (MCP)."""

    model_config = ConfigDict(extra="forbid")  # a misspelt key ("extrnal") must not load as an empty zoo

    categories: list[Category] = Field(default_factory=list)
    domains: list[Domain] = Field(default_factory=list)
    external: list[ToolSpec] = Field(default_factory=list)

    @property
    def tools(self) -> list[ToolSpec]:
        return [t for d in self.domains for t in d.tools] + list(self.external)

    def domain(self, name: str) -> Domain:
        for d in self.domains:
            if d.name == name:
                return d
        raise KeyError(f"no domain {name!r}; known: {', '.join(sorted(d.name for d in self.domains))}")

    def check_names(self) -> None:
        seen: dict[str, str] = {}
        for t in self.tools:
            if t.name in seen:
                raise SpecError(f"tool name clash: {t.name!r} is in {seen[t.name]} and {t.domain}")
            seen[t.name] = t.domain

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.mkdir(parents=True, exist_ok=True)
        # through a temporary file renamed over zoo.json: a failed write never leaves half a zoo
        tmp = p / f".zoo.json.{os.getpid()}.tmp"
        try:
            tmp.write_text(self.model_dump_json(indent=1))
            os.replace(tmp, p / "zoo.json")
        finally:
            tmp.unlink(missing_ok=True)
        return p

    @classmethod
    def load(cls, path: str | Path) -> Zoo:
        p = Path(path)
        f = p / "zoo.json" if p.is_dir() else p
        if not f.exists():
            raise SpecError(f"no zoo at {path}: expected {f} (written by `dojo synth tools` or Zoo.save)")
        try:
            return cls.model_validate_json(read_text(f, "zoo"))
        except ValidationError as e:
            raise SpecError(f"{f}: {validation_reason(e)}") from None
