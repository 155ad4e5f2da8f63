"""package_manager: every tool, its success path and its declared errors, in a real sandbox."""

import pytest

from toolzoo.testing import DomainHarness


@pytest.fixture(scope="module")
def h():
    with DomainHarness("package_manager") as harness:
        yield harness


@pytest.fixture(autouse=True)
def fresh(h):
    h.reset()


def _arrange(h, disk=50000, change=None):
    """A known machine: curl and mysql-server explicit, with old libc/zlib/openssl; every version 1000 kB."""
    s = h.state()
    for p in s["index"].values():
        for v in p["versions"].values():
            v["size_kb"] = 1000
    dep = lambda v: {"version": v, "reason": "dependency", "held": False}  # noqa: E731
    s["installed"] = {"curl": {"version": "7.81.0", "reason": "explicit", "held": False},
                      "libc-core": dep("2.31.0"), "zlib": dep("1.2.11"), "openssl": dep("1.1.1"),
                      "mysql-server": {"version": "8.0.35", "reason": "explicit", "held": False}}
    s["disk_free_kb"] = disk
    if change:
        change(s)
    h.sandbox.reset(s)
    return s


def _inst(h):
    return {n: i["version"] for n, i in h.state()["installed"].items()}


def test_search_package_index(h):
    out = h.ok("search_package_index", {"query": "Database"})["packages"]
    assert {p["name"] for p in out} == {"mysql-server", "mariadb-server"}
    assert next(p for p in out if p["name"] == "mariadb-server")["latest"] == "10.11.6"
    h.err("search_package_index", {"query": "x"}, code="query_too_short")
    h.err("search_package_index", {}, kind="invalid_arguments")


def test_get_package_info(h):
    _arrange(h)
    info = h.ok("get_package_info", {"name": "openssl"})
    assert list(info["versions"]) == ["1.1.1", "3.0.2", "3.1.0"] and info["latest"] == "3.1.0"
    assert info["installed"]["version"] == "1.1.1" and info["required_by"] == ["curl", "mysql-server"]
    assert h.ok("get_package_info", {"name": "git"})["installed"] is None
    h.err("get_package_info", {"name": "photoshop"}, code="package_not_found")


def test_list_installed_packages(h):
    _arrange(h, disk=1234)
    out = h.ok("list_installed_packages", {})
    assert [p["name"] for p in out["packages"]] == ["curl", "libc-core", "mysql-server", "openssl", "zlib"]
    assert out["disk_free_kb"] == 1234
    assert [p["name"] for p in h.ok("list_installed_packages", {"only_explicit": True})["packages"]] == ["curl", "mysql-server"]
    h.err("list_installed_packages", {"only_explicit": "no"}, kind="invalid_arguments")


def test_install_package(h):
    _arrange(h)
    r = h.ok("install_package", {"name": "vim"})
    assert r["installed"] == [{"name": "vim", "version": "9.0.2", "reason": "explicit"}] and r["disk_free_kb"] == 49000
    # python3 3.10.12 pulls libffi in at its latest version
    r = h.ok("install_package", {"name": "python3", "version": "3.10.12"})
    assert {(x["name"], x["version"], x["reason"]) for x in r["installed"]} == {
        ("python3", "3.10.12", "explicit"), ("libffi", "3.4.4", "dependency")}
    s = h.state()
    assert s["installed"]["libffi"]["reason"] == "dependency" and s["disk_free_kb"] == 47000
    h.err("install_package", {"name": "vim"}, code="already_installed")
    # a dependency becomes explicit
    assert h.ok("install_package", {"name": "zlib"})["marked_explicit"] == "zlib"
    assert h.state()["installed"]["zlib"]["reason"] == "explicit"
    h.err("install_package", {"name": "mariadb-server"}, code="package_conflict")
    h.err("install_package", {"name": "nodejs"}, code="dependency_conflict")  # needs openssl >= 3.0.2
    h.err("install_package", {"name": "vim", "version": "7.0"}, code="version_not_found")
    h.err("install_package", {"name": "emacs"}, code="package_not_found")
    h.err("install_package", {"name": "git", "version": 2}, kind="invalid_arguments")
    _arrange(h, disk=1500)
    h.err("install_package", {"name": "python3", "version": "3.10.12"}, code="insufficient_disk")
    assert "python3" not in _inst(h)


def test_remove_package(h):
    _arrange(h)
    h.err("remove_package", {"name": "openssl"}, code="required_by")
    r = h.ok("remove_package", {"name": "mysql-server"})
    assert r["removed"] == ["mysql-server"] and "mysql-server" not in _inst(h) and r["disk_free_kb"] == 51000
    r = h.ok("remove_package", {"name": "curl", "remove_orphans": True})
    assert set(r["removed"]) == {"curl", "openssl", "zlib", "libc-core"} and _inst(h) == {}
    h.err("remove_package", {"name": "curl"}, code="package_not_installed")
    _arrange(h, change=lambda s: s["installed"]["curl"].update(held=True))
    h.err("remove_package", {"name": "curl"}, code="package_held")
    # orphans stay unless asked
    h.ok("remove_package", {"name": "mysql-server"})
    assert "openssl" in _inst(h)


def test_upgrade_package(h):
    _arrange(h)
    h.err("upgrade_package", {"name": "curl"}, code="dependency_conflict")  # 8.4.0 needs openssl >= 3.0.2
    r = h.ok("upgrade_package", {"name": "openssl", "version": "3.0.2"})
    assert r["from"] == "1.1.1" and r["to"] == "3.0.2" and r["also_installed"] == []
    assert _inst(h)["openssl"] == "3.0.2" and h.state()["installed"]["openssl"]["reason"] == "dependency"
    h.ok("upgrade_package", {"name": "curl"})
    assert _inst(h)["curl"] == "8.4.0"
    h.err("upgrade_package", {"name": "curl"}, code="already_latest")
    h.err("upgrade_package", {"name": "openssl", "version": "1.1.1"}, code="downgrade_not_allowed")
    h.err("upgrade_package", {"name": "openssl", "version": "9.9.9"}, code="version_not_found")
    h.err("upgrade_package", {"name": "openssl"}, code="dependency_conflict")  # 3.1.0 needs libc-core 2.35.0
    h.err("upgrade_package", {"name": "git"}, code="package_not_installed")
    _arrange(h, change=lambda s: s["installed"]["openssl"].update(held=True))
    h.err("upgrade_package", {"name": "openssl"}, code="package_held")
    _arrange(h, change=lambda s: s["installed"].update(python3={"version": "3.10.12", "reason": "explicit", "held": False},
                                                        libffi={"version": "3.4.2", "reason": "dependency", "held": False}))
    h.ok("remove_package", {"name": "mysql-server"})
    h.ok("upgrade_package", {"name": "openssl", "version": "3.0.2"})
    h.ok("upgrade_package", {"name": "libc-core"})
    h.ok("upgrade_package", {"name": "zlib"})
    s = h.state()
    s["disk_free_kb"] = 0
    h.sandbox.reset(s)
    h.ok("upgrade_package", {"name": "libffi"})  # same size: fits in zero free space
    h.err("upgrade_package", {"name": "nodejs"}, code="package_not_installed")
    s = h.state()
    s["installed"]["nodejs"] = {"version": "18.19.0", "reason": "explicit", "held": False}
    s["index"]["nodejs"]["versions"]["20.10.0"]["depends"]["mariadb-server"] = "10.6.16"
    s["disk_free_kb"] = 10000
    s["installed"]["mysql-server"] = {"version": "8.0.35", "reason": "explicit", "held": False}
    h.sandbox.reset(s)
    h.err("upgrade_package", {"name": "nodejs"}, code="package_conflict")
    s["installed"].pop("mysql-server")
    s["disk_free_kb"] = 500
    h.sandbox.reset(s)
    h.err("upgrade_package", {"name": "nodejs"}, code="insufficient_disk")  # mariadb-server would need 1000 kB
    s["disk_free_kb"] = 1000
    h.sandbox.reset(s)
    r = h.ok("upgrade_package", {"name": "nodejs"})
    assert r["also_installed"] == [{"name": "mariadb-server", "version": "10.11.6"}] and r["disk_free_kb"] == 0


def test_set_package_hold(h):
    _arrange(h)
    assert h.ok("set_package_hold", {"name": "openssl", "held": True})["held"] is True
    assert h.state()["installed"]["openssl"]["held"] is True
    h.err("upgrade_package", {"name": "openssl", "version": "3.0.2"}, code="package_held")
    h.ok("set_package_hold", {"name": "openssl", "held": False})
    assert h.state()["installed"]["openssl"]["held"] is False
    h.err("set_package_hold", {"name": "git", "held": True}, code="package_not_installed")
    h.err("set_package_hold", {"name": "openssl"}, kind="invalid_arguments")


def test_list_upgradable_packages(h):
    _arrange(h, change=lambda s: s["installed"]["zlib"].update(held=True))
    out = {p["name"]: p for p in h.ok("list_upgradable_packages", {})["packages"]}
    assert set(out) == {"curl", "libc-core", "openssl", "zlib"}  # mysql-server has one version only
    assert out["zlib"]["held"] is True and out["openssl"]["latest"] == "3.1.0"
    h.ok("upgrade_package", {"name": "libc-core"})
    assert "libc-core" not in {p["name"] for p in h.ok("list_upgradable_packages", {})["packages"]}
