"""The package's layers: every spacy_sla module imports only from its own
layer or the layers below it, the core plugin never imports the A/B
library, the benchmark, the training helpers, the CLI or ray, and nothing
in the wheel imports the lab or the benchmarks outside it."""
import ast
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, Tuple

PACKAGE = Path(__file__).parent.parent / "spacy_sla"

# bottom to top
LAYERS = [
    {"about", "errors", "files", "user_code"},
    {"conllu", "parsers", "data_classes"},
    {"syntax"},
    {"variants"},
    {"layers"},
    {"gates"},
    {"pipeline_component", "architectures", "token_ner", "entity_guard", "parse_withdrawal"},
    {"inspection", "mask_views", "mask_statistics", "training"},
    {"ab", "benchmark", "annotation", "ray_session"},
    {"cli"},
]
LEVEL: Dict[str, int] = {name: level for level, names in enumerate(LAYERS) for name in names}


def internal_imports() -> Iterator[Tuple[Path, str, str]]:
    """(file, its top-level part, the top-level part it imports) for every
    import of a spacy_sla module, relative or absolute."""
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts == ("__init__",):
            continue
        own = parts[0]
        package = list(parts[:-1]) if parts[-1] != "__init__" else list(parts[:-1])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - (node.level - 1)]
                target = (base + (node.module or "").split("."))[0] if (base or node.module) else ""
                names = [alias.name for alias in node.names]
                yield from ((path, own, t) for t in ([target] if target else names))
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("spacy_sla."):
                yield path, own, node.module.split(".")[1]


def test_every_module_has_a_layer():
    tops = {path.relative_to(PACKAGE).with_suffix("").parts[0] for path in PACKAGE.rglob("*.py")} - {"__init__"}
    assert tops <= set(LEVEL), tops - set(LEVEL)


def test_no_module_imports_from_a_layer_above_it():
    upward = [
        f"{path.relative_to(PACKAGE)} imports {target}"
        for path, own, target in internal_imports()
        if own != target and LEVEL.get(target, -1) > LEVEL[own]
    ]
    assert upward == []


def test_the_plugin_imports_no_ab_benchmark_cli_or_ray():
    code = (
        "import sys, spacy_sla; "
        "tops = ('spacy_sla.ab', 'spacy_sla.benchmark', 'spacy_sla.cli', 'ray', 'lab', 'benchmarks'); "
        "loaded = [m for m in sys.modules if any(m == top or m.startswith(top + '.') for top in tops)]; "
        "print(loaded)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


OUTSIDE_THE_WHEEL = ("lab", "benchmarks")


def test_the_wheel_imports_neither_the_lab_nor_the_benchmarks():
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
            modules = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{path.relative_to(PACKAGE)} imports {module}" for module in modules
                      if module.split(".")[0] in OUTSIDE_THE_WHEEL]
    assert found == []


def test_every_user_command_loads_without_the_lab_or_the_benchmarks():
    code = (
        "import sys, spacy_sla.cli; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('lab', 'benchmarks')))"
    )
    result = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(PACKAGE.parent)!r}); "
                             + code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_tests_mirror_the_package():
    """Most modules spacy_sla/DIR/NAME.py have their tests in
    tests/DIR/test_NAME.py (tests/test_NAME.py for the top-level ones)."""
    tests = Path(__file__).parent
    modules = [path.relative_to(PACKAGE) for path in sorted(PACKAGE.rglob("*.py"))
               if path.name != "__init__.py" and not path.name.startswith("_")]
    missing = [str(module) for module in modules if not (tests / module.parent / f"test_{module.name}").is_file()]
    share = 1 - len(missing) / len(modules)
    assert share >= 0.85, f"{len(modules) - len(missing)}/{len(modules)} modules have a mirrored test file; missing: {missing}"
