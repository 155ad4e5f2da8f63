"""The tool DSL and its in-sandbox runtime. Standard library only.

This one file is imported on the host (to read tool metadata) and shipped as
source into every sandbox in front of a domain's code (to validate arguments
and inject controlled failures there, next to the state). Domain files write:

    from toolzoo.dsl import ToolFailure, tool

    @tool(effect="write", errors={"not_found": "no such order"})
    def cancel_order(state, order_id: str, reason: Literal["changed_mind", "damaged"]) -> dict:
        '''Cancel a pending order.

        Args:
            order_id: the order to cancel, like "O-1001".
            reason: why the customer cancels.
        '''
"""

import json
import random
import re

try:  # inside a sandbox the tool server provides these, and maps them to typed errors
    ToolFailure  # noqa: B018
    InvalidArguments  # noqa: B018
except NameError:

    class ToolFailure(Exception):  # type: ignore[no-redef]
        """A declared, agent-readable tool error (`code` is listed in the tool's errors)."""

        def __init__(self, code, message):
            super().__init__(message)
            self.code = code
            self.message = message

    class InvalidArguments(ToolFailure):  # type: ignore[no-redef]
        def __init__(self, message):
            super().__init__("invalid_arguments", message)


def tool(effect="read", errors=None, returns=None):
    """Mark a function `fn(state, **args)` as a tool; metadata only, no wrapping.

    The first parameter receives the world state whatever its name (`state`, `data`, `db`),
    so the tool's own arguments may use any name, `state` included. A bare `@tool` (no
    parentheses) marks a read with no declared errors.
    """
    if callable(effect):
        return tool()(effect)
    if effect not in ("read", "write"):
        raise ValueError("effect must be 'read' or 'write'")

    def mark(fn):
        fn.__tool__ = {"effect": effect, "errors": dict(errors or {}), "returns": returns}
        return fn

    return mark


# ---------------------------------------------------------------- validation
_TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def validate(schema, value, path="arguments"):
    """Check `value` against the subset of JSON Schema tools use; raise InvalidArguments."""
    if not isinstance(schema, dict) or not schema:
        return
    if "anyOf" in schema or "oneOf" in schema:
        options = schema.get("anyOf") or schema.get("oneOf")
        errors = []
        for option in options:
            try:
                validate(option, value, path)
                break
            except InvalidArguments as e:
                errors.append(e.message)
        else:
            raise InvalidArguments(f"{path}: matches none of the allowed forms ({'; '.join(errors)})")
    typ = schema.get("type")
    if typ is not None:
        types = typ if isinstance(typ, list) else [typ]
        if not any(_TYPES.get(t, lambda v: True)(value) for t in types):
            raise InvalidArguments(f"{path}: expected {' or '.join(types)}, got {type(value).__name__} {json.dumps(value)[:60]}")
    if "enum" in schema and value not in schema["enum"]:
        raise InvalidArguments(f"{path}: {json.dumps(value)[:60]} is not one of {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        raise InvalidArguments(f"{path}: must be {json.dumps(schema['const'])}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            raise InvalidArguments(f"{path}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise InvalidArguments(f"{path}: longer than {schema['maxLength']} characters")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            raise InvalidArguments(f"{path}: {value[:60]!r} does not match pattern {schema['pattern']}")
    if _TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            raise InvalidArguments(f"{path}: {value} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise InvalidArguments(f"{path}: {value} is above the maximum {schema['maximum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            raise InvalidArguments(f"{path}: {value} must be greater than {schema['exclusiveMinimum']}")
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            raise InvalidArguments(f"{path}: {value} must be less than {schema['exclusiveMaximum']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            raise InvalidArguments(f"{path}: needs at least {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise InvalidArguments(f"{path}: at most {schema['maxItems']} items")
        if schema.get("uniqueItems") and len({json.dumps(v, sort_keys=True) for v in value}) != len(value):
            raise InvalidArguments(f"{path}: items must be unique")
        for i, item in enumerate(value):
            validate(schema.get("items", {}), item, f"{path}[{i}]")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                raise InvalidArguments(f"{path}: missing required property {key!r}")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                validate(props[key], item, f"{path}.{key}")
            elif extra is False:
                raise InvalidArguments(f"{path}: unknown property {key!r}; allowed: {sorted(props)}")
            elif isinstance(extra, dict):
                validate(extra, item, f"{path}.{key}")


# ------------------------------------------------------------ copy on write
# A write tool works on a copy, so a tool that fails half-way leaves the world unchanged. Deep-
# copying a big database per call is the whole cost of a call, so the copy is lazy: the tool gets
# a view whose containers are shallow-copied the first time the tool reaches them, and only what
# it reaches is copied. A read tool gets such a view too, and its copy is dropped unless it wrote
# (then it was mislabelled; its change is kept so that validation sees it). The tool server asks
# for both through `begin`/`commit` on the wrapped tool.
class _Tx:
    __slots__ = ("open", "wrote")

    def __init__(self):
        self.open = True
        self.wrote = False


def _writes(cls, names):
    """Make `names` of a view class note that the tool wrote."""
    for name in names:
        base = getattr(cls.__mro__[1], name)

        def method(self, *a, _base=base, **k):
            self._tx.wrote = True
            return _base(self, *a, **k)

        method.__name__ = name
        setattr(cls, name, method)
    return cls


def _cow(value, tx):
    if type(value) is dict or (isinstance(value, CowDict) and value._tx is not tx):
        return CowDict(value, tx)
    if type(value) is list or (isinstance(value, CowList) and value._tx is not tx):
        return CowList(value, tx)
    return value


class CowDict(dict):
    """A shallow copy of a dict whose container values are copied (once) when reached."""

    __slots__ = ("_tx",)

    def __init__(self, src, tx):
        dict.__init__(self, src)
        self._tx = tx

    def _reach(self, key, value):
        if not self._tx.open:
            return value
        copied = _cow(value, self._tx)
        if copied is not value:
            dict.__setitem__(self, key, copied)
        return copied

    def __getitem__(self, key):
        return self._reach(key, dict.__getitem__(self, key))

    def get(self, key, default=None):
        return self[key] if key in self else default

    def __iter__(self):  # defined so that dict(view) and {**view} go through __getitem__
        return iter(list(dict.keys(self)))

    def values(self):
        return [self[k] for k in list(dict.keys(self))]

    def items(self):
        return [(k, self[k]) for k in list(dict.keys(self))]

    def pop(self, key, *default):
        self._tx.wrote = True
        value = dict.pop(self, key, *default)
        return _cow(value, self._tx) if self._tx.open else value

    def popitem(self):
        self._tx.wrote = True
        key, value = dict.popitem(self)
        return key, (_cow(value, self._tx) if self._tx.open else value)

    def setdefault(self, key, default=None):
        if key not in self:
            self._tx.wrote = True
            dict.__setitem__(self, key, default)
        return self[key]

    def copy(self):
        return dict(self.items())

    def __reduce_ex__(self, protocol):
        return (dict, (dict(self.items()),))


class CowList(list):
    """A shallow copy of a list whose container items are copied (once) when reached."""

    __slots__ = ("_tx",)

    def __init__(self, src, tx):
        list.__init__(self, src)
        self._tx = tx

    def _reach(self, i, value):
        if not self._tx.open:
            return value
        copied = _cow(value, self._tx)
        if copied is not value:
            list.__setitem__(self, i, copied)
        return copied

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        return self._reach(i, list.__getitem__(self, i))

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __reversed__(self):
        for i in range(len(self) - 1, -1, -1):
            yield self[i]

    def pop(self, i=-1):
        self._tx.wrote = True
        value = list.pop(self, i)
        return _cow(value, self._tx) if self._tx.open else value

    def copy(self):
        return list(self)

    def __reduce_ex__(self, protocol):
        return (list, (list(self),))


_writes(CowDict, ["__setitem__", "__delitem__", "update", "clear", "__ior__"])
_writes(CowList, ["__setitem__", "__delitem__", "append", "extend", "insert", "remove", "clear", "sort", "reverse",
                  "__iadd__", "__imul__"])


def begin_write(state):
    """The working copy a tool gets: copied lazily, where the tool reaches."""
    return _cow(state, _Tx()) if isinstance(state, (dict, list)) else state


def commit_write(old, working):
    """The state after a successful write: the views stop copying and act as plain containers."""
    tx = getattr(working, "_tx", None)
    if tx is not None:
        tx.open = False
    return working


def commit_read(old, working):
    """The state after a successful read: unchanged, unless the tool wrote (a mislabelled write)."""
    tx = getattr(working, "_tx", None)
    if tx is None or tx.wrote:
        return commit_write(old, working)
    tx.open = False
    return old


# ------------------------------------------------------- controlled failures
class Failures:
    """Seeded failure injection (Kimi K2's "controlled stochasticity").

    `modes` lists {"kind": "timeout"|"rate_limit"|"partial", "tools": [...] or ["*"]};
    each call of a matching tool fails with probability `rate`, reproducibly
    for a given seed and call order.
    """

    def __init__(self, modes, rate, seed):
        self.modes = list(modes or [])
        self.rate = float(rate or 0.0)
        self.rng = random.Random(seed)

    def pick(self, tool_name):
        if self.rate <= 0:
            return None
        modes = [m for m in self.modes if "*" in m.get("tools", ["*"]) or tool_name in m.get("tools", [])]
        if not modes:
            return None
        roll = self.rng.random()
        choice = self.rng.choice(modes)
        return choice if roll < self.rate else None


def _truncate(output):
    if isinstance(output, list):
        return output[: max(1, len(output) // 2)], True
    if isinstance(output, dict):
        out, cut = {}, False
        for k, v in output.items():
            if isinstance(v, list) and len(v) > 1:
                out[k], cut = v[: len(v) // 2], True
            else:
                out[k] = v
        return out, cut
    return output, False


def make_tool(name, fn, spec, failures):
    """Wrap `fn(state, **args)` with schema validation and failure injection.

    The world state is positional-only here, so a tool may have an argument named
    `state` (or `self`, `args`, `kwargs`): the model's arguments are all keywords.
    """
    schema = spec.get("parameters") or {"type": "object", "properties": {}}

    def call(state, /, **args):
        validate(schema, args)
        mode = failures.pick(name)
        if mode is not None and mode["kind"] == "timeout":
            raise ToolFailure("timeout", mode.get("message") or f"{name} timed out; the request had no effect, retry")
        if mode is not None and mode["kind"] == "rate_limit":
            raise ToolFailure("rate_limited", mode.get("message") or f"{name} is rate limited; wait and retry")
        output = fn(state, **args)
        if mode is not None and mode["kind"] == "partial":
            output, cut = _truncate(output)
            if cut:
                output = {"partial": True, "warning": mode.get("message") or "partial result; call again for the rest",
                          "result": output}
        return output

    call.__name__ = name
    call.__doc__ = spec.get("description", fn.__doc__)
    # The tool server copies the state through these instead of deep-copying it (see CowDict).
    call.effect = spec.get("effect", "write")
    call.begin = begin_write
    call.commit = commit_read if call.effect == "read" else commit_write
    return call


def build_tools(namespace, specs, failure_modes=(), failure_rate=0.0, failure_seed=0):
    """The TOOLS list the tool server loads: one wrapped function per spec."""
    failures = Failures(failure_modes, failure_rate, failure_seed)
    tools = []
    for spec in specs:
        fn = namespace.get(spec["function"])
        if fn is None:
            raise NameError(f"tool {spec['name']!r}: no function {spec['function']!r} in the domain source")
        tools.append(make_tool(spec["name"], fn, spec, failures))
    return tools
