"""The package's layout (docs/development.md, "Layout"): the core (the
plugin) readable on its own, the tools users run in subpackages of
spacy_sla/tools/ that use the core only through its public API, and
nothing in the wheel importing the replication or the performance
measurements outside it.

- The core is everything in spacy_sla/ outside spacy_sla/tools/: the
  top-level modules and the subpackages CORE_PACKAGES; it imports nothing
  from the tools, and its modules import only from their own layer or the
  layers below it (CORE_LAYERS).
- The core keeps no ambient state: no context variable, thread-local or
  function cache anywhere in it (the mask builders get a batch's parses
  from the model, the layers a forward pass's masks as arguments).
- The tools are the subpackages of spacy_sla/tools/ (TOOLS); they
  import a core name only as `from spacy_sla import NAME` with NAME in
  spacy_sla.__all__, or `from spacy_sla.MODULE import NAME` with NAME in
  that core module's __all__.
- The core stays near the size of the plugins it sits beside
  (spacy-transformers 2,508 lines, spacy-curated-transformers 5,278, both
  counted as here, every line of every module): CORE_LINE_BOUND, which
  holds today's size (docs/development.md states it, and
  tests/test_development_doc.py compares it with the tree) and stops
  growth; no module of the wheel is over MODULE_LINE_BOUND lines.
"""
import ast
import importlib
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

PACKAGE = Path(__file__).parent.parent / "spacy_sla"
TOOLS_PACKAGE = PACKAGE / "tools"

CORE_LINE_BOUND = 7_100
MODULE_LINE_BOUND = 400

# the core, bottom to top: a module imports from its own layer or those below it
CORE_LAYERS = [
    {"about", "errors"},
    {"parsers", "data_classes"},
    {"syntax"},
    {"variants"},
    {"layers"},
    {"gates", "training"},
    {"pipeline_component", "architectures", "entity_guard", "parse_withdrawal"},
]
CORE_LEVEL: Dict[str, int] = {name: level for level, names in enumerate(CORE_LAYERS) for name in names}
CORE_PACKAGES = {name for name in CORE_LEVEL if (PACKAGE / name).is_dir()}
# the tools (spacy_sla/tools/NAME), bottom to top: a tool imports the core's public API and the tools below it
TOOLS = ["support", "inspection", "init_config", "ab", "annotation", "benchmark", "cli"]
OUTSIDE_THE_WHEEL = ("replication", "performance")


def modules() -> List[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def top(path: Path) -> str:
    """The part of spacy_sla a module belongs to: a core part (a top-level
    module or subpackage of spacy_sla/ other than tools/), a tool (a
    subpackage of spacy_sla/tools/), "tools" for spacy_sla/tools/__init__.py
    and "" for the package's __init__."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts == ("__init__",):
        return ""
    if parts[0] == "tools":
        return "tools" if parts[1:] == ("__init__",) else parts[1]
    return parts[0]


def imports_of_the_package(path: Path) -> Iterator[Tuple[List[str], List[str]]]:
    """(the spacy_sla module imported, as parts after spacy_sla; the names
    imported from it, [] for `import spacy_sla.X`) of every import of a
    spacy_sla module in a file, relative or absolute."""
    package = list(path.relative_to(PACKAGE).parent.parts)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - (node.level - 1)]
            yield base + ((node.module or "").split(".") if node.module else []), [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "spacy_sla":
            yield node.module.split(".")[1:], [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "spacy_sla":
                    yield alias.name.split(".")[1:], []


def target_top(module: List[str], names: List[str]) -> List[str]:
    """The parts an import reaches (as top() names them): `from . import x,
    y` in the package's root reaches x and y, `spacy_sla.tools.ab.plan` the
    tool ab."""
    if module[:1] == ["tools"]:
        return [module[1]] if len(module) > 1 else names
    return [module[0]] if module else names


def test_the_core_is_outside_spacy_sla_tools_and_each_tool_a_subpackage_inside():
    tops = {top(path) for path in modules()} - {"", "tools"}
    assert sorted(tops - set(CORE_LEVEL) - set(TOOLS)) == []
    assert set(CORE_LEVEL).isdisjoint(TOOLS)
    assert CORE_PACKAGES >= {"layers", "training", "variants"}
    # every tool is a subpackage of spacy_sla/tools/, and nothing else is there
    assert sorted(path.name for path in TOOLS_PACKAGE.iterdir() if (path / "__init__.py").is_file()) \
        == sorted(TOOLS)
    assert [name for name in CORE_LEVEL if (TOOLS_PACKAGE / name).exists()] == []
    assert [path.name for path in TOOLS_PACKAGE.glob("*.py") if path.name != "__init__.py"] == []
    assert not any(isinstance(node, (ast.Import, ast.ImportFrom))
                   for node in ast.parse((TOOLS_PACKAGE / "__init__.py").read_text(encoding="utf8")).body)


def test_the_core_imports_no_tool():
    found = [f"{path.relative_to(PACKAGE)} imports {part}"
             for path in modules() if top(path) in CORE_LEVEL or top(path) == ""
             for module, names in imports_of_the_package(path)
             for part in target_top(module, names) if part in TOOLS]
    assert found == []


def test_core_modules_import_only_from_their_layer_or_below():
    upward = [f"{path.relative_to(PACKAGE)} imports {part}"
              for path in modules() if top(path) in CORE_LEVEL
              for module, names in imports_of_the_package(path)
              for part in target_top(module, names)
              if part != top(path) and CORE_LEVEL.get(part, -1) > CORE_LEVEL[top(path)]]
    assert upward == []


def public_names(module: List[str]) -> List[str]:
    return list(getattr(importlib.import_module(".".join(["spacy_sla", *module])), "__all__", []))


def test_the_tools_use_only_the_cores_public_api():
    found = []
    for path in modules():
        if top(path) not in TOOLS:
            continue
        for module, names in imports_of_the_package(path):
            reached = target_top(module, names)
            if reached and reached[0] in TOOLS:
                continue  # the tool itself, the shared helpers or a tool below (test_tools_import_tools_below)
            private = [name for name in names if name not in public_names(module)] if names else ["(import)"]
            found += [f"{path.relative_to(PACKAGE)}: spacy_sla.{'.'.join(module)} {name}" for name in private]
    assert found == []


def test_tools_import_only_themselves_and_the_tools_below_them():
    upward = [f"{path.relative_to(PACKAGE)} imports {part}"
              for path in modules() if top(path) in TOOLS
              for module, names in imports_of_the_package(path)
              for part in target_top(module, names)
              if part in TOOLS and TOOLS.index(part) > TOOLS.index(top(path))]
    assert upward == []


@pytest.mark.parametrize("load", ["import spacy_sla", "import spacy; spacy.blank('en')"])
def test_importing_the_plugin_loads_no_tool_and_no_ray(load):
    """spacy.blank fills the config's [training] blocks, for which spaCy
    loads the entry points of every registered logger, reader and
    architecture: those of the plugin must not bring in a tool."""
    tools = ("spacy_sla.tools", "ray", *OUTSIDE_THE_WHEEL)
    code = (
        f"import sys; {load}; tops = {tools!r}; "
        "print([m for m in sys.modules if any(m == top or m.startswith(top + '.') for top in tops)])"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_wheel_imports_neither_the_replication_nor_the_performance_measurements():
    found = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{path.relative_to(PACKAGE)} imports {name}" for name in names
                      if name.split(".")[0] in OUTSIDE_THE_WHEEL]
    assert found == []


def test_every_user_command_loads_without_the_replication_or_the_performance_measurements():
    code = (
        "import sys, spacy_sla.tools.cli; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {OUTSIDE_THE_WHEEL!r}))"
    )
    result = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(PACKAGE.parent)!r}); "
                             + code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf8").splitlines())


def test_the_core_is_about_the_size_of_the_plugins_beside_it():
    core = sum(line_count(path) for path in modules() if top(path) in CORE_LEVEL or top(path) == "")
    assert core <= CORE_LINE_BOUND, f"the core has {core} lines"


def test_no_module_of_the_wheel_is_over_the_line_bound():
    long = {str(path.relative_to(PACKAGE)): line_count(path) for path in modules()
            if line_count(path) > MODULE_LINE_BOUND}
    assert long == {}


def test_tests_mirror_the_package():
    """Most modules spacy_sla/DIR/NAME.py have their tests in
    tests/DIR/test_NAME.py (tests/test_NAME.py for the top-level ones); a
    tool's errors.py is tested with every code table (tests/test_errors.py)."""
    tests = Path(__file__).parent
    mirrored = [path.relative_to(PACKAGE) for path in modules()
                if path.name != "__init__.py" and not path.name.startswith("_") and path.name != "errors.py"]
    missing = [str(module) for module in mirrored if not (tests / module.parent / f"test_{module.name}").is_file()]
    share = 1 - len(missing) / len(mirrored)
    assert share >= 0.85, f"{len(mirrored) - len(missing)}/{len(mirrored)} modules have a mirrored test file; missing: {missing}"


AMBIENT_STATE_MODULES = {"contextvars"}
AMBIENT_STATE_NAMES = {("threading", "local"), ("functools", "lru_cache"), ("functools", "cache")}


def ambient_state(source: str) -> List[str]:
    """What in a module keeps state beside its arguments, for a whole
    process or thread: a context variable, a thread-local, a function cache
    (functools.lru_cache or cache, imported or reached as an attribute)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name in AMBIENT_STATE_MODULES]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found += [node.module or ""] if node.module in AMBIENT_STATE_MODULES else []
            found += [f"{node.module}.{alias.name}" for alias in node.names
                      if (node.module, alias.name) in AMBIENT_STATE_NAMES]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            found += [f"{node.value.id}.{node.attr}"] if (node.value.id, node.attr) in AMBIENT_STATE_NAMES else []
    return found


def test_the_core_keeps_no_ambient_state():
    """The core computes from its arguments: the layers get a forward pass's
    masks and settings as arguments (SyntaxAwareTransformer binds the batch
    to its own modules for the call), the mask builders a batch's parses
    from the model (DocParses); no context variable, thread-local or
    process-wide cache decides a result."""
    found = {str(path.relative_to(PACKAGE)): ambient_state(path.read_text(encoding="utf8"))
             for path in modules() if top(path) in CORE_LEVEL or top(path) == ""}
    assert {module: names for module, names in found.items() if names} == {}


def test_the_ambient_state_check_finds_each_kind():
    assert ambient_state("from contextvars import ContextVar\nBATCH = ContextVar('batch')") == ["contextvars"]
    assert ambient_state("import contextvars") == ["contextvars"]
    assert ambient_state("import threading\nSTATE = threading.local()") == ["threading.local"]
    assert ambient_state("from functools import lru_cache\n@lru_cache(8)\ndef f(x): return x") == ["functools.lru_cache"]
    assert ambient_state("import functools\n@functools.cache\ndef f(x): return x") == ["functools.cache"]
    assert ambient_state("import threading\nLOCK = threading.Lock()\nfrom functools import partial") == []
