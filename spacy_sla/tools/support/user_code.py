"""The user's own registered functions (`--code`, as spaCy's commands take
it) and the check that a config names nothing unregistered, so that a
missing `--code` is refused before anything trains instead of failing every
run with spaCy's "Can't find factory"."""
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import spacy
from spacy.util import import_file, registry

from .errors import Errors

_IMPORTED: Set[Path] = set()


def import_user_code(code_path: Optional[Path]) -> None:
    """Import the file once per process, as `spacy train --code` does;
    [SLA-E087] when it is missing or raises."""
    if code_path is None:
        return
    path = Path(code_path).resolve()
    if path in _IMPORTED:
        return
    if "" not in sys.path and str(Path.cwd()) not in sys.path:  # as under `python -m spacy`: the file's own imports
        sys.path.insert(0, str(Path.cwd()))
    if not path.is_file():
        raise ValueError(Errors.E087.format(path=code_path, reason="there is no such file"))
    try:
        import_file("python_code", path)
    except Exception as error:  # whatever the user's file raises
        raise ValueError(Errors.E087.format(path=code_path, reason=f"{type(error).__name__}: {error}")) from error
    _IMPORTED.add(path)


def _registered_references(node: Any, where: str) -> Iterator[Tuple[str, str, str]]:
    """(setting, registry, function) of every `@registry = "name"` in a config."""
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if isinstance(key, str) and key.startswith("@") and isinstance(value, str):
            yield where, key[1:], value
        elif isinstance(value, dict):
            yield from _registered_references(value, f"{where}.{key}" if where else str(key))


def unregistered(config: Dict[str, Any]) -> List[str]:
    """What the config names that no registry has in this process: the
    factories of its components (sourced ones are loaded whole) and the
    functions of its `@registry` settings; one line each."""
    lang = config.get("nlp", {}).get("lang") or "xx"
    try:
        nlp = spacy.blank(lang)
    except Exception:  # an unknown language is spaCy's own error, raised when the config loads
        nlp = spacy.blank("xx")
    missing = []
    for name, block in (config.get("components") or {}).items():
        if not isinstance(block, dict) or "source" in block:
            continue
        factory = block.get("factory")
        if isinstance(factory, str) and not nlp.has_factory(factory):
            missing.append(f"[components.{name}] factory \"{factory}\"")
    for where, registry_name, function in _registered_references(config, ""):
        if not registry.has(registry_name, function):
            missing.append(f"[{where}] @{registry_name} = \"{function}\"")
    return missing


def check_registered(config: Dict[str, Any], path: Path, code_path: Optional[Path]) -> None:
    """[SLA-E088] naming what the config at `path` uses that is not
    registered, after importing `code_path`."""
    import_user_code(code_path)
    missing = unregistered(config)
    if missing:
        shown = "; ".join(missing[:8]) + (f"; and {len(missing) - 8} more" if len(missing) > 8 else "")
        hint = (f"the file given with --code ({code_path}) does not register them" if code_path is not None
                else "pass the Python file that registers them with --code, as for `spacy train --code`")
        raise ValueError(Errors.E088.format(path=path, missing=shown, hint=hint))
