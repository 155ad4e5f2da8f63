import random

# name: (description, {version: {dependency: minimum version}}, conflicts)
PKG_CATALOGUE = {
    "libc-core": ("the C runtime library", {"2.31.0": {}, "2.35.0": {}}, []),
    "zlib": ("compression library", {"1.2.11": {"libc-core": "2.31.0"}, "1.2.13": {"libc-core": "2.31.0"},
                                     "1.3.0": {"libc-core": "2.35.0"}}, []),
    "libffi": ("foreign function interface library", {"3.4.2": {"libc-core": "2.31.0"}, "3.4.4": {"libc-core": "2.31.0"}}, []),
    "openssl": ("TLS and crypto library", {"1.1.1": {"libc-core": "2.31.0", "zlib": "1.2.11"},
                                           "3.0.2": {"libc-core": "2.31.0", "zlib": "1.2.11"},
                                           "3.1.0": {"libc-core": "2.35.0", "zlib": "1.2.13"}}, []),
    "curl": ("command line tool for transferring data with URLs", {"7.81.0": {"openssl": "1.1.1", "zlib": "1.2.11"},
                                                                   "8.4.0": {"openssl": "3.0.2", "zlib": "1.2.11"}}, []),
    "git": ("distributed version control system", {"2.34.1": {"curl": "7.81.0", "zlib": "1.2.11"},
                                                   "2.43.0": {"curl": "8.4.0", "zlib": "1.2.13"}}, []),
    "python3": ("the Python interpreter", {"3.10.12": {"openssl": "1.1.1", "zlib": "1.2.11", "libffi": "3.4.2"},
                                           "3.11.6": {"openssl": "3.0.2", "zlib": "1.2.11", "libffi": "3.4.2"},
                                           "3.12.1": {"openssl": "3.0.2", "zlib": "1.2.13", "libffi": "3.4.4"}}, []),
    "nodejs": ("JavaScript runtime", {"18.19.0": {"openssl": "3.0.2", "zlib": "1.2.11"},
                                      "20.10.0": {"openssl": "3.0.2", "zlib": "1.2.13"}}, []),
    "npm": ("package manager for JavaScript", {"9.2.0": {"nodejs": "18.19.0"}, "10.2.3": {"nodejs": "20.10.0"}}, []),
    "mysql-server": ("MySQL database server", {"8.0.35": {"openssl": "1.1.1", "libc-core": "2.31.0"}}, ["mariadb-server"]),
    "mariadb-server": ("MariaDB database server", {"10.6.16": {"openssl": "1.1.1"}, "10.11.6": {"openssl": "3.0.2"}},
                       ["mysql-server"]),
    "vim": ("a highly configurable text editor", {"8.2.0": {"libc-core": "2.31.0"}, "9.0.2": {"libc-core": "2.31.0"}}, []),
    "htop": ("interactive process viewer", {"3.0.5": {"libc-core": "2.31.0"}, "3.2.2": {"libc-core": "2.35.0"}}, []),
}


def _pkg_key(v):
    return tuple(int(x) for x in v.split("."))


def seed(rng: random.Random) -> dict:
    index = {}
    for name, (desc, versions, conflicts) in PKG_CATALOGUE.items():
        index[name] = {"description": desc, "conflicts": list(conflicts),
                       "versions": {v: {"depends": dict(deps), "size_kb": rng.randint(2, 60) * 100}
                                    for v, deps in versions.items()}}
    roots = rng.sample(["vim", "htop", "curl", "python3", "mysql-server", "git"], 3)
    installed = {}
    for r in roots:
        vs = sorted(index[r]["versions"], key=_pkg_key)
        installed[r] = {"version": vs[rng.randrange(len(vs) - 1)] if len(vs) > 1 else vs[0],
                        "reason": "explicit", "held": False}
    changed = True
    while changed:  # add dependencies at the lowest version every installed dependent accepts
        changed = False
        need = {}
        for name, inst in installed.items():
            for dep, minv in index[name]["versions"][inst["version"]]["depends"].items():
                if dep not in need or _pkg_key(minv) > _pkg_key(need[dep]):
                    need[dep] = minv
        for dep, minv in need.items():
            ok = sorted((v for v in index[dep]["versions"] if _pkg_key(v) >= _pkg_key(minv)), key=_pkg_key)[0]
            if dep not in installed:
                installed[dep] = {"version": ok, "reason": "dependency", "held": False}
                changed = True
            elif _pkg_key(installed[dep]["version"]) < _pkg_key(minv):
                installed[dep]["version"] = ok
                changed = True
    return {"disk_free_kb": rng.randint(80, 200) * 100, "index": index,
            "installed": dict(sorted(installed.items()))}
