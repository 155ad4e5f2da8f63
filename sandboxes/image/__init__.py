"""Build the sandbox image offline: debootstrap a rootfs, import it, add the tool server.

The image tag is a hash of the tool server and the Dockerfile, so an image
built from older code is never used by mistake. The same rootfs directory is
the root filesystem of the daemon-less `local` backend.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from sandboxes.errors import BackendUnavailable, SandboxError

HERE = Path(__file__).resolve().parent
SERVER_SOURCE = HERE.parent / "toolserver.py"
DOCKERFILE = HERE / "Dockerfile"
SERVER_PATH_IN_IMAGE = "/opt/tooldojo/toolserver.py"
BASE_IMAGE = "tooldojo-base:bookworm"
SUITE = "bookworm"


class ImageBuildError(SandboxError):
    """Building the rootfs or the image failed; the message says which step."""


def image_hash() -> str:
    h = hashlib.sha256(SERVER_SOURCE.read_bytes() + DOCKERFILE.read_bytes())
    return h.hexdigest()[:12]


def resolve_image(image: str) -> str:
    """`tooldojo-sandbox` means the image of this exact tool server; other names pass through."""
    if ":" in image.rsplit("/", 1)[-1] or "@" in image:
        return image
    return f"{image}:{image_hash()}"


def cache_dir() -> Path:
    return Path(os.environ.get("TOOLDOJO_CACHE", Path.home() / ".cache" / "tooldojo"))


def rootfs_dir() -> Path:
    return cache_dir() / f"rootfs-{SUITE}"


def rootfs_ready(path: Path | None = None) -> bool:
    p = path or rootfs_dir()
    return (p / "usr/bin/python3").exists() and (p / ".tooldojo-complete").exists()


def apt_mirror() -> str:
    """The Debian mirror apt is configured with (deb822 or one-line sources)."""
    for f in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        uris = suites = None
        for line in f.read_text().splitlines():
            if line.startswith("URIs:"):
                uris = line.split(":", 1)[1].split()
            if line.startswith("Suites:"):
                suites = line.split(":", 1)[1].split()
            if line.strip() == "" and uris and suites and SUITE in suites:
                return uris[0]
        if uris and suites and SUITE in suites:
            return uris[0]
    lst = Path("/etc/apt/sources.list")
    if lst.exists():
        for line in lst.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and parts[2] == SUITE:
                return parts[1]
    return "http://deb.debian.org/debian"


def build_rootfs(log: Callable[[str], None] = print, force: bool = False) -> Path:
    target = rootfs_dir()
    if rootfs_ready(target) and not force:
        log(f"rootfs ready at {target}")
        return target
    if shutil.which("debootstrap") is None:
        raise ImageBuildError("debootstrap is not installed: apt-get install debootstrap (scripts/setup.sh does)")
    if os.geteuid() != 0:
        raise ImageBuildError("debootstrap needs root; run `sudo dojo sandbox build-image`")
    tmp = target.with_name(target.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    mirror = apt_mirror()
    log(f"debootstrap --variant=minbase --include=python3 {SUITE} from {mirror} (about a minute)")
    proc = subprocess.run(
        ["debootstrap", "--variant=minbase", "--include=python3", SUITE, str(tmp), mirror],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        raise ImageBuildError("debootstrap failed: " + " | ".join(tail))
    # Mount points the sandboxes use; the root is read-only at run time.
    for d in ("workspace", "opt/tooldojo"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    os.chmod(tmp / "workspace", 0o1777)
    (tmp / "opt/tooldojo/toolserver.py").touch()
    for d in ("var/cache/apt/archives", "var/lib/apt/lists"):
        shutil.rmtree(tmp / d, ignore_errors=True)
        (tmp / d).mkdir(parents=True, exist_ok=True)
    (tmp / ".tooldojo-complete").write_text(mirror + "\n")
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    log(f"rootfs built at {target}")
    return target


def image_exists(tag: str | None = None) -> bool:
    import docker.errors

    from sandboxes.docker_client import client

    try:
        client().images.get(tag or resolve_image("tooldojo-sandbox"))
        return True
    except docker.errors.ImageNotFound:
        return False


def build_image(log: Callable[[str], None] = print, force: bool = False, base: str | None = None) -> str:
    """Build (or find) the sandbox image for this tool server; returns its tag."""
    import docker.errors

    from sandboxes.docker_client import client

    c = client()
    tag = resolve_image("tooldojo-sandbox")
    if image_exists(tag) and not force:
        log(f"image {tag} present")
        return tag
    if base is None:
        base = BASE_IMAGE
        try:
            c.images.get(BASE_IMAGE)
        except docker.errors.ImageNotFound:
            root = build_rootfs(log)
            log(f"importing {root} as {BASE_IMAGE}")
            _import_rootfs(c, root, BASE_IMAGE)
    with tempfile.TemporaryDirectory() as ctx:
        shutil.copy(SERVER_SOURCE, Path(ctx) / "toolserver.py")
        shutil.copy(DOCKERFILE, Path(ctx) / "Dockerfile")
        try:
            c.images.build(path=ctx, tag=tag, buildargs={"BASE": base}, rm=True, pull=False)
        except (docker.errors.BuildError, docker.errors.APIError) as e:
            raise ImageBuildError(f"docker build of {tag} failed: {e}") from None
    c.images.get(tag).tag("tooldojo-sandbox", "latest")
    log(f"image {tag} built")
    return tag


def _import_rootfs(c, root: Path, tag: str) -> None:
    # Stream a tar of the rootfs into `docker import` without a temp file.
    r, w = os.pipe()
    import threading

    def writer() -> None:
        with os.fdopen(w, "wb") as f, tarfile.open(fileobj=f, mode="w|") as tar:
            for entry in sorted(os.listdir(root)):
                tar.add(root / entry, arcname=entry)

    t = threading.Thread(target=writer)
    t.start()
    try:
        with os.fdopen(r, "rb") as f:
            repo, _, ver = tag.partition(":")
            c.api.import_image_from_data(f, repository=repo, tag=ver or "latest")
    finally:
        t.join()


def ensure_backend_image(log: Callable[[str], None] = print) -> None:
    try:
        build_image(log)
    except BackendUnavailable:
        build_rootfs(log)
