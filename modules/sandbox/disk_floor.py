"""The free space commands must leave on the file systems of the workspace (which they write)
and of the data folder (where the history goes): the larger of AGENT_DISK_FLOOR_MB and
AGENT_DISK_FLOOR_PERCENT of the file system's size. Free is what df calls available: what a
writer without root's reserve may still use."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from modules.sandbox.runner import SandboxUnavailable
from utils.settings import Settings

MB = 1024 * 1024
SETTINGS_NAMES = "AGENT_DISK_FLOOR_MB, AGENT_DISK_FLOOR_PERCENT"


class DiskFloorReached(SandboxUnavailable):
    """A file system the command could fill is already below its floor: it is not started."""


@dataclass(frozen=True)
class Usage:
    """What statvfs says of one file system, in bytes."""

    free: int
    size: int


@dataclass(frozen=True)
class Place:
    """A watched file system: a folder on it and how the model is told about it."""

    path: Path
    name: str
    holds_workspace: bool


@dataclass(frozen=True)
class Shortage:
    """A file system found below its floor."""

    place: Place
    free: int
    floor: int

    def refusal(self) -> str:
        """Why a command was not started, and what to do."""
        return (
            f"Not run: {self._below('has')}, kept free for this server and the system "
            f"({SETTINGS_NAMES}). {self._remedy()}"
        )

    def stop_note(self) -> str:
        """The line a command stopped at the floor ends its output with."""
        return (
            f"[Stopped: this command was killed when {self._below('had')}, kept free for this "
            f"server and the system. What it wrote is still there. {self._remedy()} Then "
            "write less (clean up as you go, or compress) and run it again.]"
        )

    def _below(self, verb: str) -> str:
        return (
            f"{self.place.name} ({self.place.path}) {verb} {self.free // MB} MB free, below the "
            f"floor of {self.floor // MB} MB"
        )

    def _remedy(self) -> str:
        if self.place.holds_workspace:
            return (
                "Make room first: delete files this task no longer needs with delete_file "
                "(list_files shows them), or ask the user to free space on that disk."
            )
        return "Commands cannot free that disk: ask the user to make room on it."


@dataclass(frozen=True)
class Floor:
    """The free space a file system must keep: the larger of `floor_bytes` and `percent` of its
    size (both 0: none)."""

    floor_bytes: int = 0
    percent: float = 0.0

    @classmethod
    def of(cls, settings: Settings) -> Floor:
        """The floor the settings set."""
        return cls(settings.disk_floor_mb * MB, settings.disk_floor_percent)

    @property
    def active(self) -> bool:
        return bool(self.floor_bytes or self.percent)

    def floor_of(self, usage: Usage) -> int:
        """The free space one file system must keep, in bytes."""
        return max(self.floor_bytes, int(usage.size * self.percent / 100))

    def room(self, path: Path) -> tuple[int, Usage] | None:
        """What may still be written on the file system holding `path` before its floor, and
        its usage (None: no floor, or it cannot be read)."""
        usage = usage_of(_existing(path)) if self.active else None
        return None if usage is None else (usage.free - self.floor_of(usage), usage)


class DiskFloor:
    """The floor of the workspace's and the data folder's file systems (one when they share)."""

    def __init__(self, settings: Settings) -> None:
        self.floor = Floor.of(settings)
        self.places = _places(settings.workspace, settings.data_dir)

    @property
    def active(self) -> bool:
        return self.floor.active

    def describe(self) -> str:
        """The isolation list's line."""
        if not self.active:
            return "disk: no floor (AGENT_DISK_FLOOR_MB and AGENT_DISK_FLOOR_PERCENT are 0)"
        names = " or ".join(place.name for place in self.places)
        floor_bytes, percent = self.floor.floor_bytes, self.floor.percent
        floors = [f"{floor_bytes // MB} MB"] if floor_bytes else []
        floors += [f"{percent:g}% of its size"] if percent else []
        larger = " (the larger)" if len(floors) == 2 else ""
        return (
            f"disk: a command is not started, and is stopped, when {names} has less than "
            f"{' or '.join(floors)}{larger} free"
        )

    def judge(self, usages: Mapping[Path, Usage | None]) -> tuple[Shortage | None, int | None]:
        """The first place below its floor, and the smallest room left above a floor (None
        when no place could be measured)."""
        room: int | None = None
        for place in self.places:
            usage = usages.get(place.path)
            if usage is None:
                continue
            floor = self.floor.floor_of(usage)
            if usage.free < floor:
                return Shortage(place, usage.free, floor), 0
            room = usage.free - floor if room is None else min(room, usage.free - floor)
        return None, room

    def refuse_if_short(self) -> None:
        """Raise DiskFloorReached when a place is below its floor now."""
        if not self.active:
            return
        shortage, _ = self.judge({place.path: usage_of(place.path) for place in self.places})
        if shortage is not None:
            raise DiskFloorReached(shortage.refusal())


def usage_of(path: Path) -> Usage | None:
    """Free space and size of the file system holding `path` (None if it cannot be read)."""
    try:
        found = os.statvfs(path)
    except OSError:
        return None
    return Usage(found.f_bavail * found.f_frsize, found.f_blocks * found.f_frsize)


def _places(workspace: Path, data_dir: Path) -> tuple[Place, ...]:
    folders = [_existing(workspace), _existing(data_dir)]
    devices = [_device(folder) for folder in folders]
    if devices[0] == devices[1]:
        return (Place(folders[0], "the file system of the workspace and the data folder", True),)
    return (
        Place(folders[0], "the workspace's file system", True),
        Place(folders[1], "the data folder's file system", False),
    )


def _existing(path: Path) -> Path:
    """`path`, or its nearest folder that exists (the data folder may not be made yet)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _device(path: Path) -> int | None:
    try:
        return path.stat().st_dev
    except OSError:
        return None
