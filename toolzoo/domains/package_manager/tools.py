from toolzoo.dsl import ToolFailure, tool


def _pkg_ver(v):
    return tuple(int(x) for x in v.split("."))


def _pkg_latest(state, name):
    return max(state["index"][name]["versions"], key=_pkg_ver)


def _pkg_known(state, name):
    if name not in state["index"]:
        raise ToolFailure("package_not_found", f"no package {name!r} in the index; try search_package_index")
    return state["index"][name]


def _pkg_installed(state, name):
    if name not in state["installed"]:
        raise ToolFailure("package_not_installed", f"{name} is not installed; see list_installed_packages")
    return state["installed"][name]


def _pkg_dependents(state, name):
    """Installed packages whose installed version depends on `name`."""
    return sorted(n for n, inst in state["installed"].items()
                  if name in state["index"][n]["versions"][inst["version"]]["depends"])


def _pkg_plan(state, name, version, plan, reason):
    """Add `name`@`version` and its missing dependencies to `plan` ({name: (version, reason)})."""
    pkg = state["index"][name]
    for other in list(state["installed"]) + list(plan):
        if other in pkg["conflicts"] or name in state["index"][other]["conflicts"]:
            raise ToolFailure("package_conflict", f"{name} conflicts with {other}; {other} must be removed first")
    plan[name] = (version, reason)
    for dep, minv in sorted(pkg["versions"][version]["depends"].items()):
        have = state["installed"].get(dep, {}).get("version") or (plan[dep][0] if dep in plan else None)
        if have is not None:
            if _pkg_ver(have) < _pkg_ver(minv):
                raise ToolFailure("dependency_conflict", f"{name} {version} needs {dep} >= {minv} but {dep} {have} is "
                                  f"installed; upgrade_package {dep} first (or choose an older {name})")
            continue
        _pkg_plan(state, dep, _pkg_latest(state, dep), plan, "dependency")


def _pkg_apply(state, plan, size_delta_extra=0):
    need = sum(state["index"][n]["versions"][v]["size_kb"] for n, (v, _) in plan.items()) + size_delta_extra
    if need > state["disk_free_kb"]:
        raise ToolFailure("insufficient_disk", f"needs {need} kB but only {state['disk_free_kb']} kB are free; "
                          "remove packages to make room")
    state["disk_free_kb"] -= need
    for n, (v, reason) in plan.items():
        state["installed"][n] = {"version": v, "reason": reason, "held": False}
    state["installed"] = dict(sorted(state["installed"].items()))


@tool(errors={"query_too_short": "the query needs at least 2 characters"})
def search_package_index(state, query: str) -> dict:
    """Search the package index by name or description; shows the latest version and the installed one.

    Args:
        query: words in the package name or description, e.g. "database" or "ssl".
    """
    q = query.strip().lower()
    if len(q) < 2:
        raise ToolFailure("query_too_short", "give at least 2 characters")
    out = [{"name": n, "description": p["description"], "latest": _pkg_latest(state, n),
            "installed": state["installed"].get(n, {}).get("version")}
           for n, p in sorted(state["index"].items()) if q in n.lower() or q in p["description"].lower()]
    return {"packages": out}


@tool(errors={"package_not_found": "unknown package name"})
def get_package_info(state, name: str) -> dict:
    """Show a package: every version with its dependencies (minimum versions) and size, conflicts, and install status with reverse dependencies.

    Args:
        name: the package name, e.g. "openssl".
    """
    p = _pkg_known(state, name)
    return {"name": name, "description": p["description"], "conflicts": p["conflicts"],
            "versions": {v: p["versions"][v] for v in sorted(p["versions"], key=_pkg_ver)},
            "latest": _pkg_latest(state, name), "installed": state["installed"].get(name),
            "required_by": _pkg_dependents(state, name) if name in state["installed"] else []}


@tool()
def list_installed_packages(state, only_explicit: bool = False) -> dict:
    """List installed packages with version, why they were installed (explicit or dependency) and hold status; also free disk.

    Args:
        only_explicit: hide packages that were pulled in only as dependencies.
    """
    out = [{"name": n, **inst} for n, inst in sorted(state["installed"].items())
           if inst["reason"] == "explicit" or not only_explicit]
    return {"packages": out, "disk_free_kb": state["disk_free_kb"]}


@tool(effect="write", errors={
    "package_not_found": "unknown package name", "version_not_found": "the index has no such version",
    "already_installed": "the package is installed already", "package_conflict": "it conflicts with an installed package",
    "dependency_conflict": "an installed dependency is too old", "insufficient_disk": "not enough free disk space"})
def install_package(state, name: str, version: str | None = None) -> dict:
    """Install a package (latest version unless one is given) plus any missing dependencies at their latest versions.
    A package that was only installed as a dependency is marked explicit instead.

    Args:
        name: the package to install, e.g. "git".
        version: an exact version from get_package_info; null for the latest.
    """
    p = _pkg_known(state, name)
    if version is not None and version not in p["versions"]:
        raise ToolFailure("version_not_found", f"{name} has no version {version}; available: {sorted(p['versions'], key=_pkg_ver)}")
    inst = state["installed"].get(name)
    if inst:
        if inst["reason"] == "dependency" and version in (None, inst["version"]):
            inst["reason"] = "explicit"
            return {"installed": [], "marked_explicit": name, "version": inst["version"]}
        raise ToolFailure("already_installed", f"{name} {inst['version']} is already installed; use upgrade_package to change version")
    plan = {}
    _pkg_plan(state, name, version or _pkg_latest(state, name), plan, "explicit")
    _pkg_apply(state, plan)
    return {"installed": [{"name": n, "version": v, "reason": r} for n, (v, r) in sorted(plan.items())],
            "disk_free_kb": state["disk_free_kb"]}


@tool(effect="write", errors={
    "package_not_installed": "the package is not installed", "package_held": "held packages cannot be removed",
    "required_by": "other installed packages depend on it"})
def remove_package(state, name: str, remove_orphans: bool = False) -> dict:
    """Uninstall a package; refuses while other installed packages depend on it.

    Args:
        name: the package to remove.
        remove_orphans: also remove packages that were installed only as dependencies and are no longer needed.
    """
    inst = _pkg_installed(state, name)
    if inst["held"]:
        raise ToolFailure("package_held", f"{name} is held; release the hold (set_package_hold) before removing it")
    deps = _pkg_dependents(state, name)
    if deps:
        raise ToolFailure("required_by", f"{name} is required by {', '.join(deps)}; remove those first")
    removed = [name]
    state["disk_free_kb"] += state["index"][name]["versions"][inst["version"]]["size_kb"]
    del state["installed"][name]
    while remove_orphans:
        orphans = [n for n, i in sorted(state["installed"].items())
                   if i["reason"] == "dependency" and not i["held"] and not _pkg_dependents(state, n)]
        if not orphans:
            break
        for n in orphans:
            state["disk_free_kb"] += state["index"][n]["versions"][state["installed"].pop(n)["version"]]["size_kb"]
            removed.append(n)
    return {"removed": removed, "disk_free_kb": state["disk_free_kb"]}


@tool(effect="write", errors={
    "package_not_installed": "the package is not installed", "package_held": "the package is held at its version",
    "version_not_found": "the index has no such version", "already_latest": "the target version is already installed",
    "downgrade_not_allowed": "the target is older than the installed version",
    "dependency_conflict": "an installed dependency is too old for the new version",
    "package_conflict": "a new dependency conflicts with an installed package", "insufficient_disk": "not enough free disk space"})
def upgrade_package(state, name: str, version: str | None = None) -> dict:
    """Upgrade an installed package (to the latest version unless one is given), installing any new dependencies.

    Args:
        name: the installed package.
        version: the exact target version; null for the latest.
    """
    inst = _pkg_installed(state, name)
    p = state["index"][name]
    if inst["held"]:
        raise ToolFailure("package_held", f"{name} is held at {inst['version']}; release the hold first if the user agrees")
    target = version or _pkg_latest(state, name)
    if target not in p["versions"]:
        raise ToolFailure("version_not_found", f"{name} has no version {target}; available: {sorted(p['versions'], key=_pkg_ver)}")
    if target == inst["version"]:
        raise ToolFailure("already_latest", f"{name} {target} is already installed")
    if _pkg_ver(target) < _pkg_ver(inst["version"]):
        raise ToolFailure("downgrade_not_allowed", f"{target} is older than the installed {inst['version']}; downgrades are not supported")
    old = inst["version"]
    del state["installed"][name]  # plan against everything else
    plan = {}
    _pkg_plan(state, name, target, plan, inst["reason"])
    _pkg_apply(state, plan, -p["versions"][old]["size_kb"])
    return {"upgraded": name, "from": old, "to": target,
            "also_installed": [{"name": n, "version": v} for n, (v, _) in sorted(plan.items()) if n != name],
            "disk_free_kb": state["disk_free_kb"]}


@tool(effect="write", errors={"package_not_installed": "the package is not installed"})
def set_package_hold(state, name: str, held: bool) -> dict:
    """Hold an installed package at its current version (blocks upgrade and removal), or release the hold.

    Args:
        name: the installed package.
        held: true to hold, false to release.
    """
    inst = _pkg_installed(state, name)
    inst["held"] = held
    return {"name": name, "version": inst["version"], "held": held}


@tool()
def list_upgradable_packages(state) -> dict:
    """List installed packages with a newer version in the index (held ones are flagged; they will not be upgraded)."""
    out = [{"name": n, "installed": i["version"], "latest": _pkg_latest(state, n), "held": i["held"]}
           for n, i in sorted(state["installed"].items()) if _pkg_latest(state, n) != i["version"]]
    return {"packages": out}
