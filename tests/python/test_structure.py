"""The package's modules import one another one way: no circle, counting the imports made
inside functions too (docs/architecture.md, "The rank-side API")."""

import ast
from pathlib import Path

import primus

PACKAGE = Path(primus.__file__).resolve().parent


def imports_of(path):
    """The package's modules that `path` imports, anywhere in it."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module is None:
                names.update(alias.name for alias in node.names)
            elif node.level == 1:
                names.add(node.module.split(".")[0])
            elif node.module == "primus":
                names.update(alias.name for alias in node.names)
    return {name for name in names if (PACKAGE / f"{name}.py").exists()}


def test_no_module_imports_one_that_imports_it_back():
    graph = {path.stem: imports_of(path) for path in PACKAGE.glob("*.py")
             if path.stem != "__init__"}
    assert graph["_runtime"], "the graph is read"
    cycles = []

    def visit(module, trail):
        for target in sorted(graph.get(module, ())):
            if target in trail:
                cycles.append(" -> ".join(trail[trail.index(target):] + [target]))
            elif target not in done:
                visit(target, trail + [target])
        done.add(module)

    done = set()
    for module in sorted(graph):
        if module not in done:
            visit(module, [module])
    assert cycles == []
