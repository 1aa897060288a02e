"""The benchmarks stay beside the product: the wheel leaves them out, and no product
module imports them (so an installed Lectern runs without them)."""

from __future__ import annotations

import ast
import tomllib
from fnmatch import fnmatchcase
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
PRODUCT = ("approvals", "catalog", "config", "retrieval")


def in_wheel(package: str) -> bool:
    """Whether pyproject.toml's package discovery takes `package`: setuptools matches each
    package's dotted name against the find config's include and exclude patterns (fnmatch)."""
    found = tomllib.loads((BASE_DIR / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    return (any(fnmatchcase(package, pattern) for pattern in found["include"])
            and not any(fnmatchcase(package, pattern) for pattern in found.get("exclude", ())))


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return names | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}


def test_the_wheel_takes_the_product_packages_and_no_benchmark():
    assert all(in_wheel(package) for package in PRODUCT)
    assert not [p for p in ("benchmarks", "benchmarks.commands", "tests", "tests.benchmarks", "stubs") if in_wheel(p)]


def test_no_product_module_imports_the_benchmarks():
    importers = [str(path.relative_to(BASE_DIR)) for package in PRODUCT for path in (BASE_DIR / package).rglob("*.py")
                 if any(name == "benchmarks" or name.startswith("benchmarks.") for name in imported_modules(path))]

    assert importers == []
