"""Every function spacy_sla registers is declared as an entry point, so that
a config naming it resolves in a process that never imported spacy_sla
(`spacy train` with a config only, a pipeline loaded by `spacy.load`)."""
import configparser
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, Set, Tuple

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "spacy_sla"
REGISTRY_OF_GROUP = {
    "spacy_factories": "factories",
    "spacy_architectures": "architectures",
    "spacy_misc": "misc",
    "spacy_loggers": "loggers",
    "spacy_readers": "readers",
    "spacy_scorers": "scorers",
}
REGISTERED = re.compile(r'@registry\.(\w+)\(\s*"([^"]+)"')
FACTORY = re.compile(r'@Language\.factory\(\s*"([^"]+)"')
DEFINED = re.compile(r"^def (\w+)\(", re.M)


def registered_in_source() -> Set[Tuple[str, str, str]]:
    """(registry, name, module:function) of every decorator in the package."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf8")
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for match in [*REGISTERED.finditer(text), *FACTORY.finditer(text)]:
            registry, name = match.groups() if match.re is REGISTERED else ("factories", match.group(1))
            function = DEFINED.search(text, match.end()).group(1)
            found.add((registry, name, f"{module}:{function}"))
    return found


def declared() -> Set[Tuple[str, str, str]]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg", encoding="utf8")
    found = set()
    for group, registry in REGISTRY_OF_GROUP.items():
        for line in parser["options.entry_points"].get(group, "").splitlines():
            if "=" in line:
                name, target = (part.strip() for part in line.split("="))
                found.add((registry, name, target))
    return found


def test_every_registered_function_is_an_entry_point():
    assert registered_in_source() == declared()
    assert ("misc", "spacy-sla.syntax_mask.v1", "spacy_sla.variants.syntax_mask:create_syntax_mask") in declared()


RESOLVE_IN_FRESH_PROCESS = """
import json, sys
from spacy.util import registry
entries = json.loads(sys.argv[1])
imported_before = "spacy_sla" in sys.modules
resolved = {}
for registry_name, name, _ in entries:
    function = getattr(registry, registry_name).get(name)
    resolved[name] = f"{function.__module__}:{function.__name__}"
print(json.dumps({"imported_before": imported_before, "resolved": resolved}))
"""


def test_each_entry_point_resolves_in_a_fresh_process(tmp_path):
    entries = sorted(declared())
    result = subprocess.run(
        [sys.executable, "-c", RESOLVE_IN_FRESH_PROCESS, json.dumps(entries)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report: Dict = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["imported_before"] is False
    assert report["resolved"] == {name: target for _, name, target in entries}


def reference_listing() -> Dict[str, Set[str]]:
    """docs/reference.md's registry names, per entry point group (the text
    block of "Registry names")."""
    section = (ROOT / "docs" / "reference.md").read_text(encoding="utf8").split("## Registry names", 1)[1]
    block = re.findall(r"```text\n(.*?)```", section.split("\n## ", 1)[0], re.S)[0]
    groups: Dict[str, Set[str]] = {}
    for line in block.splitlines():
        if line and not line.startswith(" "):
            group = groups.setdefault(line.strip(), set())
        elif line.strip():
            group.add(line.split()[0])
    return groups


def entry_point_names() -> Dict[str, Set[str]]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg", encoding="utf8")
    section = parser["options.entry_points"]
    return {group: {line.split("=")[0].strip() for line in section[group].splitlines() if "=" in line}
            for group in section}


def test_the_reference_lists_every_entry_point():
    assert reference_listing() == entry_point_names()
