"""Where commands' cgroups are made: under the server's own cgroup in each hierarchy, so a
limit set on the service (a systemd unit, a container, a pod) covers its commands too.

/proc/self/mountinfo says where each hierarchy is mounted (cgroup v1: one per controller,
v2: one for all), /proc/self/cgroup which cgroup of each holds the server. cgroup v2 lets no
cgroup with member processes give a controller to its children, so there the server first
moves itself and its children into a leaf (SERVER_LEAF) of its own cgroup. When the server's
cgroup cannot take children, the hierarchy's root is used, as before, and the log says why.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CONTROLLERS = ("pids", "memory")
SERVER_LEAF = "workspace-agent-server"  # v2: holds the server, so its cgroup may have children


@dataclass(frozen=True)
class Hierarchy:
    """One mounted cgroup hierarchy offering some of CONTROLLERS."""

    mountpoint: Path
    v2: bool
    controllers: frozenset[str]
    own: Path | None  # the server's cgroup in it, as a folder; None when not mounted here


def hierarchies(mountinfo: str, own_cgroups: str) -> list[Hierarchy]:
    """The hierarchies of CONTROLLERS mounted here, read from the texts of
    /proc/self/mountinfo and /proc/self/cgroup, each with the server's cgroup's folder."""
    paths_v1: dict[str, str] = {}
    path_v2: str | None = None
    for line in own_cgroups.splitlines():
        number, _, rest = line.partition(":")
        names, _, path = rest.partition(":")
        if number == "0" and not names:
            path_v2 = path
        for name in names.split(","):
            paths_v1[name] = path
    found = []
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields, (fstype, _, options) = left.split(), [*right.split(), "", "", ""][:3]
        if fstype not in ("cgroup", "cgroup2") or len(fields) < 5:
            continue
        mountpoint, root = Path(fields[4]), fields[3]
        if fstype == "cgroup2":
            own = _folder(mountpoint, root, path_v2)
            found.append(Hierarchy(mountpoint, True, _offered_v2(mountpoint, own), own))
            continue
        controllers = frozenset({*options.split(",")} & {*CONTROLLERS})
        if controllers:
            own = _folder(mountpoint, root, paths_v1.get(min(controllers)))
            found.append(Hierarchy(mountpoint, False, controllers, own))
    return [h for h in found if h.controllers]


def _offered_v2(mountpoint: Path, own: Path | None) -> frozenset[str]:
    """What v2 lets the children of the server's cgroup have: the root's delegated
    controllers when the server is in the root (or cannot be found), else those its cgroup
    was given."""
    place = mountpoint if own is None else _place_of(own)
    name = "cgroup.subtree_control" if _is_root(place) else "cgroup.controllers"
    return frozenset(_read_words(place / name) & {*CONTROLLERS})


def _is_root(folder: Path) -> bool:
    """Whether `folder` is v2's real root, which alone may hold processes and give children
    controllers (a cgroup namespace's root, a container's, may not): it has no
    cgroup.events."""
    return not (folder / "cgroup.events").exists()


def _folder(mountpoint: Path, root: str, path: str | None) -> Path | None:
    """The folder of cgroup `path` under a mount of the hierarchy's `root` part."""
    if path is None or not path.startswith("/"):
        return None
    if root == "/":
        relative = path.lstrip("/")
    elif path == root or path.startswith(root + "/"):
        relative = path[len(root) :].lstrip("/")
    else:
        return None
    folder = mountpoint / relative if relative else mountpoint
    return folder if folder.is_dir() else None


def command_parent(hierarchy: Hierarchy) -> Path | None:
    """The folder commands' cgroups go in: the server's own cgroup, else (logged) the root."""
    reason = _nested_refusal(hierarchy)
    if reason is None:
        assert hierarchy.own is not None
        return _place_of(hierarchy.own)
    root = hierarchy.mountpoint
    usable = os.access(root, os.W_OK) and (
        not hierarchy.v2 or {*hierarchy.controllers} <= _read_words(root / "cgroup.subtree_control")
    )
    fields = {"hierarchy": str(root), "reason": reason, "fallback": str(root) if usable else None}
    log.warning(
        "commands' cgroups are not nested in the server's own, so limits set on the server's "
        "cgroup do not cover them",
        extra={"fields": fields},
    )
    return root if usable else None


def _nested_refusal(hierarchy: Hierarchy) -> str | None:
    """Why commands' cgroups cannot go under the server's own; None when they can (and, v2,
    once the server moved into its leaf and gave the controllers to its cgroup's children)."""
    own = hierarchy.own
    if own is None:
        return "the server's own cgroup is not visible in this mount"
    if not os.access(own, os.W_OK):
        return f"the server's own cgroup {own} is not writable"
    if not hierarchy.v2:
        return None
    place = _place_of(own)
    wanted = {*hierarchy.controllers}
    if wanted <= _read_words(place / "cgroup.subtree_control"):
        return None
    if _is_root(place):
        return "the server runs in the hierarchy's root, which does not delegate the controllers"
    return _move_into_leaf(place, wanted)


def _place_of(own: Path) -> Path:
    """The server's cgroup proper: its leaf's parent when it moved into one (this process, or
    the server process that started it)."""
    return own.parent if own.name == SERVER_LEAF else own


def _move_into_leaf(place: Path, wanted: set[str]) -> str | None:
    """Move this process and its descendants from `place` into its leaf, then let `place`'s
    children have `wanted`; the reason when that cannot be done."""
    members = _read_words(place / "cgroup.procs")
    ours = _descendants_of(os.getpid(), members)
    others = members - ours
    if others:
        return (
            f"{len(others)} other process(es) share the server's cgroup {place}, and cgroup v2 "
            "lets a cgroup with processes give no controller to children: run the server in "
            "a cgroup of its own (a systemd service, a container)"
        )
    leaf = place / SERVER_LEAF
    try:
        leaf.mkdir(exist_ok=True)
        for pid in sorted(ours):
            with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                (leaf / "cgroup.procs").write_text(pid)
        control = " ".join(f"+{name}" for name in sorted(wanted))
        (place / "cgroup.subtree_control").write_text(control)
    except OSError as exc:
        return f"could not give {place}'s children the controllers: {exc}"
    log.info("the server moved into a leaf of its cgroup", extra={"fields": {"leaf": str(leaf)}})
    return None


def _descendants_of(ancestor: int, pids: set[str]) -> set[str]:
    """Those of `pids` that are `ancestor` or descend from it (by /proc's parent links)."""
    parents: dict[str, str] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                stat = Path("/proc", name, "stat").read_text()
                parents[name] = stat.rsplit(")", 1)[1].split()[1]
    found = set()
    for pid in pids:
        chain, seen = pid, set()
        while chain in parents and chain not in seen and chain != str(ancestor):
            seen.add(chain)
            chain = parents[chain]
        if chain == str(ancestor):
            found.add(pid)
    return found


def _read_words(path: Path) -> set[str]:
    try:
        return {*path.read_text().split()}
    except OSError:
        return set()
