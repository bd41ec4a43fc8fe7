"""docs/development.md true to the tree: the sizes it states (the core's
lines and modules, the tools'), the bounds tests/test_layout.py enforces,
and its counts of mask variants, adapter shapes and encoder families,
computed from the same definitions as tests/test_layout.py (what is core,
what is a tool), so that a move of modules keeps the comparison."""
import re
from pathlib import Path
from typing import Dict, List

from test_layout import CORE_LEVEL, CORE_LINE_BOUND, MODULE_LINE_BOUND, PACKAGE, TOOLS, line_count, modules, top

from spacy_sla.layers import ATTENTION_FAMILIES

DEVELOPMENT = Path(__file__).parent.parent / "docs" / "development.md"
NUMBER_WORDS = {"three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
                "eleven": 11, "twelve": 12}
SIZES = re.compile(
    r"at most ([\d,]+) lines \(today ([\d,]+) lines in (\d+) modules, the tools ([\d,]+) lines in\s+(\d+):"
    r"\s+the (\w+) mask variants.*?(\w+) encoder families.*?no module of the\s+wheel is over (\d+) lines",
    re.S,
)


def text() -> str:
    return DEVELOPMENT.read_text(encoding="utf8")


def number(written: str) -> int:
    return NUMBER_WORDS[written.lower()] if written.lower() in NUMBER_WORDS else int(written.replace(",", ""))


def parts() -> Dict[str, List[Path]]:
    """The wheel's modules by part, as tests/test_layout.py divides them."""
    return {
        "core": [path for path in modules() if top(path) in CORE_LEVEL or top(path) == ""],
        "tools": [path for path in modules() if top(path) in TOOLS],
    }


def stated_sizes() -> Dict[str, int]:
    found = SIZES.search(text())
    assert found, "docs/development.md has no sentence 'at most N lines (today N lines in N modules, the tools ...'"
    names = ["bound", "core_lines", "core_modules", "tool_lines", "tool_modules", "variants", "families", "module_bound"]
    return {name: number(value) for name, value in zip(names, found.groups())}


def package_modules(folder: Path) -> List[Path]:
    """The modules of a package that are neither its __init__ nor a shared base or registry."""
    return [path for path in folder.glob("*.py") if path.stem not in {"__init__", "adapter", "registry"}]


def test_the_sizes_it_states_are_the_trees():
    stated = stated_sizes()
    found = parts()
    actual = {
        "bound": CORE_LINE_BOUND,
        "core_lines": sum(line_count(path) for path in found["core"]),
        "core_modules": len(found["core"]),
        "tool_lines": sum(line_count(path) for path in found["tools"]),
        "tool_modules": len(found["tools"]),
        "variants": len(package_modules(PACKAGE / "variants")),
        "families": len(ATTENTION_FAMILIES),
        "module_bound": MODULE_LINE_BOUND,
    }
    assert stated == actual, "update docs/development.md (Layout) to the tree's numbers"


def test_the_adapter_shapes_and_test_families_it_names_are_the_trees():
    shapes = re.search(r"(\w+) shapes exist, a module each: ([^.]+)\.", text())
    adapters = sorted(path.stem for path in package_modules(PACKAGE / "layers" / "family_adapters"))
    assert shapes and number(shapes.group(1)) == len(adapters)
    assert sorted(re.findall(r"`(\w+)`", shapes.group(2))) == adapters
    families = re.search(r"Tests build tiny random models of the (\w+) encoder families", text())
    assert families and number(families.group(1)) == len(ATTENTION_FAMILIES)


def test_every_variant_has_its_test_module():
    """"its tests in tests/variants/test_NAME.py", as the doc says of every variant."""
    assert "tests/variants/test_NAME.py" in text()
    tests = Path(__file__).parent / "variants"
    missing = [path.stem for path in package_modules(PACKAGE / "variants") if not (tests / f"test_{path.stem}.py").is_file()]
    assert missing == []
