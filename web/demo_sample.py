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
from pathlib import Path

from model.demo_scripts import DEMO_DIR
from web.state import WebState

SAMPLE = DEMO_DIR / "workspace"
RECORD = "demo-sample.json"


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
    """Every regular file under `root` with its bytes; None past `limit` files or for anything
    else (a link, a special file), which no copy of the sample holds."""
    found: dict[str, bytes] = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            if path.is_symlink() or not path.is_file() or len(found) >= limit:
                return None
            found[path.relative_to(root).as_posix()] = path.read_bytes()
    return found


def demo_sample(state: WebState) -> DemoSample:
    return DemoSample(state.services.workspace.root, state.settings.data_dir)
