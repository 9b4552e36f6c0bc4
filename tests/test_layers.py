"""The layering of docs/architecture.md, kept true: every import statement of every module (also the
ones inside functions) is read, and a layer importing Spark, dbt or a higher layer fails here. In
store/, key_index/ and assign/, an import of a dbt_paimon module inside a function fails too (it
usually hides an import circle), and the module-level imports between their modules must form no
circle."""

import ast
import os

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dbt_paimon")

# layer -> what it must never import (top-level module names, and dbt_paimon's own packages)
FORBIDDEN = {
    "store": {"pyspark", "dbt", "dbt_common", "dbt_paimon.assign", "dbt_paimon.key_index", "dbt_paimon.engine",
              "dbt_paimon.adapter"},
    "key_index": {"pyspark", "dbt", "dbt_common", "dbt_paimon.assign", "dbt_paimon.engine", "dbt_paimon.adapter"},
    "assign": {"pyspark", "dbt", "dbt_common", "dbt_paimon.engine", "dbt_paimon.adapter"},
    "engine": {"dbt", "dbt_common", "dbt_paimon.sql", "dbt_paimon.adapter"},
    # inside the engine: the job runtime knows no writer and no read path; a read knows no writer
    "engine/runtime": {"dbt_paimon.engine.writes", "dbt_paimon.engine.read"},
    "engine/read": {"dbt_paimon.engine.writes"},
    "sql": {"dbt", "dbt_common", "dbt_paimon.adapter"},
}


def _parse(path: str) -> ast.Module:
    with open(path) as f:
        return ast.parse(f.read(), path)


def _from_module(node: ast.ImportFrom, package: str) -> str:
    """The absolute module of `from <module> import ...` (relative: resolved against `package`)."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(path: str, package: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in one file."""
    out = []
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.lineno, _from_module(node, package)))
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


# ---- the adapter uses the public faces only ----------------------------------------------------------

# the packages whose face (`__init__.py`, its `__all__`) the adapter may import from
FACES = ("dbt_paimon.engine", "dbt_paimon.sql", "dbt_paimon.store", "dbt_paimon.key_index")


def _public_names(package: str) -> set[str]:
    init = os.path.join(os.path.dirname(PACKAGE), *package.split("."), "__init__.py")
    for node in _parse(init).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def _reaches_past_a_face(path: str, package: str) -> list[str]:
    """The imports of one adapter module that name a dbt_paimon module behind a face, or a name the
    face does not export."""
    found = []
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.startswith("dbt_paimon.")]
        elif isinstance(node, ast.ImportFrom):
            module = _from_module(node, package)
            if module.split(".")[0] != "dbt_paimon" or module.startswith(package):
                continue
            names = [f"{module}.{a.name}" if module == "dbt_paimon" else a.name for a in node.names]
            if module == "dbt_paimon":
                found += [f"{node.lineno}: {n}" for n in names if n not in FACES]
            elif module not in FACES:
                found.append(f"{node.lineno}: {module}")
            else:
                found += [f"{node.lineno}: {module}.{n}" for n in names if n not in _public_names(module)]
    return found


def test_the_adapter_imports_only_the_public_faces():
    found = [f"{os.path.relpath(path, PACKAGE)}:{hit}" for path, package in _modules("adapter")
             for hit in _reaches_past_a_face(path, package)]
    assert not found, "the adapter reaches past a face (export it there, in __all__):\n" + "\n".join(found)


def test_the_face_check_sees_what_it_must(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from ..engine import upsert, commit_loop\nfrom ..store.table import FileStoreTable\n"
                 "from .. import key_index, assign\nfrom . import staging\nimport dbt_paimon.store\n")
    assert _reaches_past_a_face(str(f), "dbt_paimon.adapter") == [
        "1: dbt_paimon.engine.commit_loop", "2: dbt_paimon.store.table", "3: dbt_paimon.assign",
        "5: import dbt_paimon.store"]


# ---- no import circles in store/, key_index/ and assign/ ----------------------------------------------

INTERNAL_LAYERS = ("store", "key_index", "assign")

# Imports of dbt_paimon modules inside a function (or class body) that stay, as
# "<file under dbt_paimon/>: <imported module>" -> why. An import circle is no reason: it is broken by
# moving code (docs/architecture.md, "Rules every layer keeps").
FUNCTION_LEVEL_IMPORTS_ALLOWED: dict[str, str] = {}


def _is_module(name: str) -> bool:
    path = os.path.join(os.path.dirname(PACKAGE), *name.split("."))
    return os.path.isfile(path + ".py") or os.path.isfile(os.path.join(path, "__init__.py"))


def _dbt_paimon_modules(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The dbt_paimon modules one import statement loads (`from . import x` loads module x)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "dbt_paimon"]
    module = _from_module(node, package)
    if module.split(".")[0] != "dbt_paimon":
        return []
    return list(dict.fromkeys(f"{module}.{a.name}" if _is_module(f"{module}.{a.name}") else module
                              for a in node.names))


def _function_level_imports(path: str, package: str) -> list[tuple[int, str]]:
    """(line, module) of each import of a dbt_paimon module inside a function or class body."""
    nested: dict[int, ast.AST] = {}
    for scope in ast.walk(_parse(path)):
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            for node in ast.walk(scope):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    nested[id(node)] = node
    out = []
    for node in sorted(nested.values(), key=lambda n: n.lineno):
        out += [(node.lineno, m) for m in _dbt_paimon_modules(node, package)]
    return out


def _module_level_imports(path: str, package: str) -> set[str]:
    """The dbt_paimon modules a file imports when it loads (an `if TYPE_CHECKING:` block never runs)."""
    out: set[str] = set()
    todo = list(_parse(path).body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update(_dbt_paimon_modules(node, package))
        elif isinstance(node, ast.If):
            type_only = isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
            todo += node.orelse if type_only else node.body + node.orelse
        elif isinstance(node, ast.Try):
            todo += node.body + node.orelse + node.finalbody + [n for h in node.handlers for n in h.body]
    return out


def _module_name(path: str) -> str:
    rel = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].replace(os.sep, ".")
    return rel.removesuffix(".__init__")


def test_store_key_index_and_assign_import_nothing_inside_functions():
    found: dict[str, list[int]] = {}
    for layer in INTERNAL_LAYERS:
        for path, package in _modules(layer):
            for line, name in _function_level_imports(path, package):
                found.setdefault(f"{os.path.relpath(path, PACKAGE)}: {name}", []).append(line)
    unexplained = [f"{k} (line {', '.join(map(str, v))})" for k, v in sorted(found.items())
                   if k not in FUNCTION_LEVEL_IMPORTS_ALLOWED]
    assert not unexplained, ("imports inside functions: break the circle they hide, or list them in "
                             "FUNCTION_LEVEL_IMPORTS_ALLOWED with the reason:\n" + "\n".join(unexplained))
    stale = sorted(set(FUNCTION_LEVEL_IMPORTS_ALLOWED) - set(found))
    assert not stale, f"FUNCTION_LEVEL_IMPORTS_ALLOWED lists imports that are gone: {stale}"
    assert all(reason.strip() for reason in FUNCTION_LEVEL_IMPORTS_ALLOWED.values())


def test_store_key_index_and_assign_have_no_import_circles():
    graph = {}
    for layer in INTERNAL_LAYERS:
        for path, package in _modules(layer):
            me = _module_name(path)
            graph[me] = _module_level_imports(path, package) - {me}
    circles: list[str] = []
    done: set[str] = set()

    def visit(module: str, trail: list[str]) -> None:
        if module in trail:
            circles.append(" -> ".join(trail[trail.index(module):] + [module]))
        elif module in graph and module not in done:
            for nxt in sorted(graph[module]):
                visit(nxt, trail + [module])
            done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert not circles, "import circles:\n" + "\n".join(circles)


def test_the_circle_checks_see_what_they_must(tmp_path):
    """Imports in functions, methods and class bodies are found; module-level, TYPE_CHECKING-only and
    other packages' imports are not."""
    f = tmp_path / "m.py"
    f.write_text("from typing import TYPE_CHECKING\n"
                 "from . import schema\n"
                 "if TYPE_CHECKING:\n    from .table import FileStoreTable\n"
                 "def g():\n    from ..snapshot.tags import TagManager\n    import json\n"
                 "class C:\n    def m(self):\n        from ...assign import bucket_assigner\n"
                 "    from ..common import options as opts\n")
    package = "dbt_paimon.store.schema"
    assert _function_level_imports(str(f), package) == [
        (6, "dbt_paimon.store.snapshot.tags"), (10, "dbt_paimon.assign.bucket_assigner"),
        (11, "dbt_paimon.store.common.options")]
    assert _module_level_imports(str(f), package) == {"dbt_paimon.store.schema.schema"}


def test_every_broad_except_says_why():
    """A broad except is allowed where its `noqa: BLE001 - ...` says why (pyproject.toml [tool.ruff])."""
    repo, bare = os.path.dirname(PACKAGE), []
    for top in ("dbt_paimon", "tests", "bench", "integration_tests", "dbt"):
        for d, dirs, files in os.walk(os.path.join(repo, top)):
            dirs[:] = [x for x in dirs if x not in (".work", ".venv", "__pycache__")]
            for name in (f for f in files if f.endswith(".py")):
                with open(os.path.join(d, name)) as f:
                    for n, line in enumerate(f, 1):
                        if line.rstrip().endswith("# noqa: BLE001"):
                            bare.append(f"{os.path.relpath(os.path.join(d, name), repo)}:{n}")
    assert bare == []
