"""The page's own modules (static/js/*.js) are each type-checked, and of a size that does one job.

`make lint` runs tsc on the files that start with `// @ts-check` (jsconfig.json): a module
without it is not checked at all, silently. A module over 400 lines, or a function over 50,
does two jobs (the project's rule); functions are measured with TypeScript's own parser.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "static" / "js"
TYPESCRIPT = ROOT / "node_modules" / "typescript"
MAX_LINES = 400
MAX_FUNCTION_LINES = 50

# Every function, method and arrow function of the files given, as [file, line, name, lines].
MEASURE = """
const ts = require(process.argv[1]);
const fs = require("fs");
const found = [];
for (const file of process.argv.slice(2)) {
  const text = fs.readFileSync(file, "utf8");
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS);
  const visit = (node) => {
    if (ts.isFunctionLike(node) && node.body) {
      const first = source.getLineAndCharacterOfPosition(node.getStart()).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const name = node.name?.getText() ?? node.parent?.name?.getText?.() ?? "(anonymous)";
      found.push([file, first + 1, name, last - first + 1]);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}
console.log(JSON.stringify(found));
"""


def page_modules() -> list[Path]:
    modules = sorted(PAGE.glob("*.js"))
    assert modules, f"no modules in {PAGE}"
    return modules


def test_every_module_is_type_checked() -> None:
    unchecked = [
        path.name
        for path in page_modules()
        if path.read_text(encoding="utf-8").splitlines()[:1] != ["// @ts-check"]
    ]
    assert not unchecked, f"these modules do not start with `// @ts-check`: {unchecked}"


def test_no_module_is_over_the_size_of_one_job() -> None:
    sizes = {
        path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in page_modules()
    }
    large = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert not large, f"modules over {MAX_LINES} lines (split them by job): {large}"


def test_no_function_is_over_the_size_of_one_job() -> None:
    node = shutil.which("node")
    if node is None or not TYPESCRIPT.is_dir():
        pytest.skip(
            "node or node_modules/typescript (npm ci) is missing: functions are measured with it"
        )
    files = [str(path) for path in page_modules()]
    done = subprocess.run(
        [node, "-e", MEASURE, str(TYPESCRIPT), *files],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    functions = json.loads(done.stdout)
    assert len(functions) > 100  # the parser saw the page's functions
    long = [
        f"{Path(file).name}:{line} {name} ({lines} lines)"
        for file, line, name, lines in functions
        if lines > MAX_FUNCTION_LINES
    ]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines (one job each): {long}"
