"""The package's modules import each other in layers: no cycle, and no import inside a
function to hide one (the fork server's, made only in its own process, is the one exception)."""

import ast
import pathlib

import skyrl_runtime

PACKAGE = pathlib.Path(skyrl_runtime.__file__).parent
# (importer, imported) pairs that may import inside a function, and why.
DEFERRED = {("_host", "_forkserver"): "only a fork server's process needs it (it imports numpy)"}


def _imports():
    """{module: {(imported module, at top level)}} for the package's own modules ("" is the
    package itself, "util.queue" a submodule's)."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        package = parts[:-1]  # what `from .` means in this file
        if parts[-1] == "__init__":
            parts = parts[:-1]
        tree = ast.parse(path.read_text(), str(path))
        top = {id(n) for n in tree.body}
        found = set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level == 0:
                continue
            base = package[:len(package) - (node.level - 1)]
            names = [node.module] if node.module else [a.name for a in node.names]
            for n in names:
                found.add((".".join(base + n.split(".")), id(node) in top))
        out[".".join(parts)] = found
    return out


def test_no_module_imports_inside_a_function_to_dodge_a_cycle():
    nested = sorted((m, t) for m, found in _imports().items() for t, at_top in found
                    if not at_top and (m, t) not in DEFERRED)
    assert nested == [], f"imports inside functions: {nested}"


def test_the_modules_import_each_other_without_a_cycle():
    graph = {m: {t for t, at_top in found if at_top and t != m} for m, found in _imports().items()}
    state = {}

    def visit(m, path):
        if state.get(m) == "done":
            return
        assert state.get(m) != "open", f"import cycle: {' -> '.join(path + [m])}"
        state[m] = "open"
        for t in sorted(graph.get(m, ())):
            if t in graph:
                visit(t, path + [m])
        state[m] = "done"

    for m in sorted(graph):
        visit(m, [])
    assert len(graph) > 20, "the package's modules were found"
