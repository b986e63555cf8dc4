"""The page's own modules (static/js/*.js) are each type-checked.

`make lint` runs tsc on the files that start with `// @ts-check` (jsconfig.json): a module
without it is not checked at all, silently.
"""

from __future__ import annotations

from pathlib import Path

PAGE = Path(__file__).resolve().parent.parent / "static" / "js"


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
