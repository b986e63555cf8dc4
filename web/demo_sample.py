"""The demo's sample workspace: whether this workspace is the demo's copy of it, and putting it
back (web/demo_reset.py).

Only a workspace that began as the sample may be wiped: the first start of the demo provider on
a workspace identical to `demo/workspace` records so in the data folder
(DATA_DIR/demo-sample.json), and only a workspace so recorded is reset. A folder of one's own
run with AGENT_PROVIDER=demo never matches the sample, so its files are never deleted."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

from model.demo_scripts import DEMO_DIR
from modules.results import ToolError
from modules.workspace.safe_fs import SafeRoot
from web.state import WebState

SAMPLE = DEMO_DIR / "workspace"
RECORD = "demo-sample.json"
MAX_FILE_BYTES = 64 * 1024  # the sample's files are a few KB


class DemoSample:
    """Whether this workspace is the demo's copy of the sample, and putting the sample back."""

    def __init__(self, workspace: Path, data_dir: Path) -> None:
        self.workspace, self.record = workspace, data_dir / RECORD

    def claim(self) -> None:
        """Record the workspace as the sample's copy if it is one, untouched."""
        if not self.record.exists() and _files(self.workspace) == _files(SAMPLE):
            self.record.parent.mkdir(parents=True, exist_ok=True)
            self.record.write_text(json.dumps({"workspace": str(self.workspace)}) + "\n")

    @property
    def available(self) -> bool:
        try:
            recorded = json.loads(self.record.read_text(encoding="utf-8")).get("workspace")
        except (OSError, ValueError, AttributeError):
            return False
        return recorded == str(self.workspace)

    def restore(self) -> None:
        """Remove everything in the workspace, then copy the sample in (links are removed,
        never followed)."""
        with os.scandir(self.workspace) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
        shutil.copytree(SAMPLE, self.workspace, dirs_exist_ok=True)


def _files(root: Path, limit: int = 100) -> dict[str, bytes] | None:
    """Every regular file under `root` with its bytes; None past `limit` entries, for a file
    over MAX_FILE_BYTES, or for anything else (a link, a special file): no copy of the sample
    holds them. The workspace is read through its fd walk, as what tasks wrote."""
    fs = SafeRoot(root)
    found: dict[str, bytes] = {}
    folders, seen = [""], 0
    try:
        while folders:
            folder = folders.pop()
            for name, info in fs.list_dir(folder):
                rel = f"{folder}/{name}" if folder else name
                seen += 1
                if seen > limit:
                    return None
                if stat.S_ISDIR(info.st_mode):
                    folders.append(rel)
                elif stat.S_ISREG(info.st_mode) and info.st_size <= MAX_FILE_BYTES:
                    found[rel] = fs.read_bytes(rel, MAX_FILE_BYTES + 1)
                else:
                    return None
    except (OSError, ToolError):  # changed while read: not the sample as it was
        return None
    return found


def demo_sample(state: WebState) -> DemoSample:
    return DemoSample(state.services.workspace.root, state.settings.data_dir)
