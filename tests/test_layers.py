"""The layering of docs/architecture.md, kept true: every import statement of every module (also the
ones inside functions) is read, and a layer importing Spark, dbt or a higher layer fails here."""

import ast
import os

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dbt_paimon")

# layer -> what it must never import (top-level module names, and dbt_paimon's own packages)
FORBIDDEN = {
    "store": {"pyspark", "dbt", "dbt_common", "dbt_paimon.assign", "dbt_paimon.engine", "dbt_paimon.adapter"},
    "assign": {"pyspark", "dbt", "dbt_common", "dbt_paimon.engine", "dbt_paimon.adapter"},
    "engine": {"dbt", "dbt_common", "dbt_paimon.adapter"},
}


def _imports(path: str, package: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in one file."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((node.lineno, name))
    return out


def _modules(layer: str):
    root = os.path.join(PACKAGE, layer)
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(d, f), os.path.dirname(PACKAGE))[:-3].replace(os.sep, ".")
                package = rel if f == "__init__.py" else rel.rsplit(".", 1)[0]
                yield os.path.join(d, f), package.removesuffix(".__init__")


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(layer):
    found = []
    for path, package in _modules(layer):
        for line, name in _imports(path, package):
            if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN[layer]):
                found.append(f"{os.path.relpath(path, PACKAGE)}:{line} imports {name}")
    assert not found, "\n".join(found)


def test_the_check_sees_relative_and_nested_imports(tmp_path):
    """The rule must catch `from ..engine import x` inside a function (else it could not fail)."""
    f = tmp_path / "m.py"
    f.write_text("def g():\n    from ..engine import upsert\n    import pyspark.sql\n")
    assert _imports(str(f), "dbt_paimon.store") == [(2, "dbt_paimon.engine"), (3, "pyspark.sql")]
