"""The folder of arm configs init-config writes and `spacy sla ab` reads:
its manifest (sla-configs.json: each arm's file and SHA-256, the input and
the options), the arms edited since, and the settings in which an arm may
differ from the reference (arm_differences)."""
import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..support.files import write_atomically
from .errors import Errors
from .user_config import PARSER_VARIABLE
from .variant_blocks import REFERENCE

MANIFEST = "sla-configs.json"
MANIFEST_VERSION = 1
# the training lists in which init-config names the parser it adds
PARSER_LISTS = ("nlp.pipeline", "training.annotating_components", "training.frozen_components")


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_manifest(config_dir: Path) -> Dict[str, Any]:
    """The manifest init-config wrote in config_dir; [SLA-E055] without one."""
    path = config_dir / MANIFEST
    if not path.is_file():
        problem = f"has no {MANIFEST}"
    else:
        try:
            manifest = json.loads(path.read_text(encoding="utf8"))
        except (OSError, ValueError) as error:
            problem = f"has an unreadable {MANIFEST} ({error})"
        else:
            if isinstance(manifest, dict) and isinstance(manifest.get("arms"), dict) \
                    and REFERENCE in manifest["arms"]:
                return manifest
            problem = f"has a {MANIFEST} that names no {REFERENCE} arm"
    raise ValueError(Errors.E055.format(config_dir=config_dir, problem=problem, manifest=MANIFEST))


def manifest_variants(config_dir: Path) -> List[str]:
    """The variants of config_dir's manifest, the reference left out."""
    return [variant for variant in read_manifest(config_dir)["arms"] if variant != REFERENCE]


def edited_arms(config_dir: Path, arms: Sequence[str]) -> List[str]:
    """The arm files changed since init-config wrote them (their SHA-256 is
    not the manifest's): allowed, as arm_differences still holds them to
    attention, but worth a word."""
    manifest = read_manifest(config_dir)
    edited = []
    for arm in arms:
        entry = manifest["arms"].get(arm, {})
        path = config_dir / entry.get("file", f"{arm}.cfg")
        if path.is_file() and sha256_of(path) != entry.get("sha256"):
            edited.append(str(path))
    return edited


def write_manifest(
    config_dir: Path,
    arms: Dict[str, Path],
    *,
    transformer: str,
    added_components: Sequence[str] = (),
    source: Optional[Path] = None,
    options: Optional[Dict[str, Any]] = None,
) -> Path:
    """Record the configs of config_dir that `spacy sla ab` compares: each
    arm's file and SHA-256, the transformer component whose blocks differ,
    the components init-config added (the parser and its entity guard),
    the input config and the options."""
    manifest = {
        "made_by": "spacy sla init-config", "version": MANIFEST_VERSION,
        "source": None if source is None else {"path": str(source), "sha256": sha256_of(source)},
        "options": options or {}, "transformer": transformer, "added_components": list(added_components),
        "arms": {arm: {"file": path.name, "sha256": sha256_of(path)} for arm, path in arms.items()},
    }
    path = config_dir / MANIFEST
    write_atomically(path, json.dumps(manifest, indent=2).encode("utf8"))
    return path


def _flatten(node: Dict[str, Any], prefix: str = "") -> Dict[str, Any]:
    """A config as dotted paths to values; an empty section is a value."""
    flat: Dict[str, Any] = {}
    for key, value in node.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


_ABSENT = object()


def arm_differences(reference: Dict[str, Any], arm: Dict[str, Any], transformer: str,
                    added_components: Sequence[str] = ()) -> List[str]:
    """The dotted settings in which an arm's config differs from the
    reference's beyond what init-config makes differ: the transformer's
    blocks, and, where vanilla was left without the added parser, that
    parser's blocks (and its entity guard's), its names in the pipeline
    and training lists, [paths] parser and its null score weights."""
    ours, theirs = _flatten(reference), _flatten(arm)
    added = set(added_components)
    own_blocks = [f"components.{name}" for name in (transformer, *added_components)]

    def allowed(key: str) -> bool:
        if any(key == block or key.startswith(block + ".") for block in own_blocks):
            return True
        if key in PARSER_LISTS:
            return [name for name in ours.get(key, []) or [] if name not in added] \
                == [name for name in theirs.get(key, []) or [] if name not in added]
        if added and key == f"paths.{PARSER_VARIABLE}":
            return True
        return bool(added) and key.startswith("training.score_weights.") \
            and ours.get(key) is None and theirs.get(key) is None

    return [key for key in sorted(set(ours) | set(theirs))
            if ours.get(key, _ABSENT) != theirs.get(key, _ABSENT) and not allowed(key)]


def describe_present(output_dir: Path, earlier: Dict[str, str]) -> str:
    names = sorted(path.name for path in output_dir.iterdir())
    ours = [name for name in names if name in earlier or name == MANIFEST]
    others = [name for name in names if name not in ours]
    parts = []
    if ours:
        parts.append(", ".join(ours) + " (written by an earlier init-config call)")
    if others:
        parts.append(", ".join(others) + " (not written by init-config)")
    return "; ".join(parts)


def earlier_files(output_dir: Path) -> Dict[str, str]:
    """File name -> SHA-256 of the configs an earlier call's manifest names."""
    try:
        manifest = read_manifest(output_dir)
    except ValueError:
        return {}
    return {entry["file"]: entry.get("sha256", "") for entry in manifest["arms"].values()
            if isinstance(entry, dict) and isinstance(entry.get("file"), str)}

