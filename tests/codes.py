"""Every table of coded errors and warnings: the core's (spacy_sla/errors.py),
each tool's beside it (spacy_sla/tools/TOOL/errors.py) and the replication's
(replication/errors.py, prefixed SLA-REPLICATION)."""
import importlib
import re
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).parent.parent
WHEEL_ERROR_MODULES = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts) for path in (ROOT / "spacy_sla").rglob("errors.py")
)
REPLICATION_ERROR_MODULE = "replication.errors"


def tables(module_name: str) -> List[type]:
    module = importlib.import_module(module_name)
    return [getattr(module, name) for name in ("Errors", "Warnings") if hasattr(module, name)]


def codes(table: type) -> List[str]:
    return sorted(name for name in vars(table) if re.fullmatch(r"[EW]\d{3}", name))


def coded(module_names: List[str]) -> List[Tuple[type, str]]:
    """(table, code) of every code the modules define."""
    return [(table, code) for name in module_names for table in tables(name) for code in codes(table)]


def prefix(table: type) -> str:
    return type(table).prefix
