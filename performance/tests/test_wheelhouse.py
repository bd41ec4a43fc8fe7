"""The wheelhouse of the GPU check (performance/wheelhouse.py): what it
carries and why, its stripped wheels, its size limit, and (slow) a
wheelhouse for this machine's Python that installs into a fresh virtual
environment without network and runs the check there."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from base64 import urlsafe_b64encode
from importlib import metadata
from pathlib import Path

import pytest

from performance import wheelhouse
from performance.wheelhouse import (
    IMAGE_PREFIXES,
    IMAGE_VERSIONS,
    ROOTS,
    OverLimit,
    carried,
    closure,
    manylinux_platforms,
    strip_debug_sections,
)

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_closure_follows_the_requirements_with_the_targets_markers():
    requires = {
        "app": ("1.0", ["lib>=2", "old-backport; python_version < '3.12'", "extra-tool; extra == 'dev'"]),
        "lib": ("2.1", ["base<3"]),
        "base": ("2.9", []),
        "old-backport": ("0.1", []),
    }
    found = closure(["app"], "3.12", requires)
    assert found == {"app": ("1.0", {}), "lib": ("2.1", {"app": ">=2"}), "base": ("2.9", {"lib": "<3"})}
    assert "old-backport" in closure(["app"], "3.11", requires)


def test_what_the_image_provides_at_an_accepted_version_is_not_carried():
    found = {
        "spacy": ("3.8.18", {"app": ">=3.8"}),
        "transformers": ("4.53.2", {"app": "<4.53.3", "other": ">=4"}),
        "numpy": ("2.4.6", {"spacy": ">=1.19"}),
        "requests": ("2.34.2", {"spacy": ">=2.13"}),
        "nvidia-cublas": ("13.0", {"torch": ""}),
        "typer": ("0.29.2", {"spacy": "<1.0.0,>=0.3.0"}),
    }
    image = {"transformers": "5.17.0", "numpy": "2.5.2", "requests": None, "typer": None}
    chosen = {entry.name: entry for entry in carried(found, image)}
    assert set(chosen) == {"spacy", "transformers", "typer"}
    assert chosen["spacy"].reason == "not in the image"
    assert chosen["transformers"].reason == "the image has 5.17.0, app needs <4.53.3"
    assert chosen["transformers"].version == "4.53.2"


def test_the_projects_closure_carries_the_spacy_stack_over_the_images_torch():
    names = {entry.name for entry in carried(closure(ROOTS, "3.12"))}
    assert {"spacy", "thinc", "blis", "spacy-transformers", "spacy-sla", "transformers", "tokenizers", "huggingface-hub",
            "pydantic", "srsly", "weasel"} <= names
    assert not names & {"torch", "numpy", "scipy", "requests", "safetensors"}
    assert not any(name.startswith(IMAGE_PREFIXES) for name in names)


def test_the_platforms_are_every_manylinux_tag_of_the_glibc():
    platforms = manylinux_platforms("x86_64", (2, 39))
    assert platforms[0] == "manylinux_2_39_x86_64" and "manylinux_2_17_x86_64" in platforms
    assert platforms[-3:] == ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]


def record_hash(data: bytes) -> str:
    return "sha256=" + urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def a_compiled_extension_with_debug_sections() -> Path:
    """A shared library of this environment's spaCy (its wheels keep their debugging sections)."""
    import spacy

    for path in sorted(Path(spacy.__file__).parent.rglob("*.so")):
        if ".debug_info" in subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True).stdout:
            return path
    pytest.skip("no compiled extension with debugging sections in this environment")


def test_stripping_keeps_a_wheel_whose_record_matches_its_files(tmp_path):
    if shutil.which("strip") is None or shutil.which("readelf") is None:
        pytest.skip("no strip or readelf (binutils)")
    library = a_compiled_extension_with_debug_sections()
    wheel = tmp_path / "toy-1.0-cp311-cp311-linux_x86_64.whl"
    files = {
        "toy/__init__.py": b"",
        "toy/ext.so": library.read_bytes(),
        "toy-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: toy\nVersion: 1.0\n",
        "toy-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n",
    }
    record = "".join(f"{name},{record_hash(data)},{len(data)}\n" for name, data in files.items()) + "toy-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("toy-1.0.dist-info/RECORD", record)
    stripped = strip_debug_sections(wheel)
    assert stripped is not None and stripped.name == wheel.name and stripped.stat().st_size < len(files["toy/ext.so"]) / 2
    with zipfile.ZipFile(stripped) as archive:
        rows = [line.split(",") for line in archive.read("toy-1.0.dist-info/RECORD").decode().splitlines()]
        for name, digest, size in rows:
            if digest:
                data = archive.read(name)
                assert digest == record_hash(data) and int(size) == len(data), name
        assert archive.read("toy/ext.so")[:4] == b"\x7fELF" and len(archive.read("toy/ext.so")) < len(files["toy/ext.so"])
    assert strip_debug_sections(stripped) is None  # nothing left to strip: the wheel stays as it is


def test_a_wheelhouse_over_the_limit_is_refused_and_the_folder_left_as_it_was(tmp_path, monkeypatch):
    def fake_download(names, folder, python_version, platforms):
        for name in names:
            base, version = name.split("==")
            (folder / f"{base.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"x" * 1000)

    monkeypatch.setattr(wheelhouse, "download", fake_download)
    monkeypatch.setattr(wheelhouse, "build_plugin_wheel", lambda folder: (folder / "spacy_sla-0.1.0-py3-none-any.whl").write_bytes(b"x"))
    monkeypatch.setattr(wheelhouse, "save_parser_pipeline", lambda folder: {"folder": folder.name, "bytes": 5 * 2**20})
    monkeypatch.setattr(wheelhouse, "travelling_tree_bytes", lambda leaving_out: 3 * 2**20)
    output = tmp_path / ".whl"
    output.mkdir()
    (output / "earlier.whl").write_bytes(b"kept")
    with pytest.raises(OverLimit, match=r"come to 8\.0 MiB, over the 6 MiB .* left as it was"):
        wheelhouse.build(output, limit_mib=6, strip=False)
    assert [path.name for path in output.iterdir()] == ["earlier.whl"]
    assert not (tmp_path / ".whl.partial").exists()
    manifest = wheelhouse.build(output, limit_mib=9, strip=False)
    assert (output / "manifest.json").exists() and not (output / "earlier.whl").exists()
    assert json.loads((output / "manifest.json").read_text()) == manifest
    assert {entry["name"] for entry in manifest["wheels"]} >= {"spacy", "spacy-sla", "transformers"}


def image_stand_in(folder: Path, carried_names: set) -> Path:
    """This environment's copies of the distributions the GPU machine's image
    provides (and the wheelhouse does not carry), linked into `folder`: with
    it on PYTHONPATH a fresh interpreter sees what the image would give it."""
    folder.mkdir()
    for distribution in metadata.distributions():
        name = wheelhouse.canonical(distribution.metadata["Name"])
        if name in carried_names or not (name in IMAGE_VERSIONS or name.startswith(IMAGE_PREFIXES)):
            continue
        site = Path(distribution.locate_file(""))
        for top in {Path(str(file)).parts[0] for file in distribution.files or []}:
            source, target = site / top, folder / top
            if source.exists() and not target.exists() and not top.endswith(".pth") and top != "..":
                target.symlink_to(source)
    return folder


NETWORK_TROUBLE = re.compile(r"NewConnectionError|Failed to establish|Temporary failure in name resolution|Max retries exceeded")


@pytest.mark.slow  # downloads about 50 MB of wheels, a fresh virtual environment, two short `spacy train` runs
def test_a_wheelhouse_for_this_python_installs_without_network_and_runs_the_check(tmp_path):
    folder = tmp_path / "whl"
    python_version = f"{sys.version_info.major}.{sys.version_info.minor}"
    glibc = tuple(int(part) for part in os.confstr("CS_GNU_LIBC_VERSION").split()[1].split(".")[:2])
    command = [sys.executable, "-m", "performance.gpu_check", "wheelhouse", "--output", str(folder), "--python-version",
               python_version, "--limit-mib", "500", *sum((["--platform", tag] for tag in manylinux_platforms("x86_64", glibc)), [])]
    built = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if built.returncode != 0 and NETWORK_TROUBLE.search(built.stderr):
        pytest.skip(f"the package index cannot be reached: {built.stderr.strip().splitlines()[-1]}")
    assert built.returncode == 0, built.stderr[-3000:]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert f"{manifest['wheel_bytes'] / 2**20:.1f} MiB" in built.stdout
    carried_names = {entry["name"] for entry in manifest["wheels"]}
    environment = tmp_path / "fresh"
    venv.create(environment, with_pip=True)
    stand_in = image_stand_in(tmp_path / "image", carried_names)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PYTHONPATH=str(stand_in), PIP_NO_INDEX="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    output = tmp_path / "out"
    check = subprocess.run(
        [str(environment / "bin" / "python"), "-m", "performance.gpu_check", "run", "--gpu-id", "-1", "--wheelhouse",
         str(folder), "--output", str(output), "--steps", "environment,train"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    summary = json.loads((output / "summary.json").read_text())
    assert check.returncode == 0 and summary["passed"], (output / "steps.log").read_text()[-4000:]
    install, probe, train = summary["steps"]
    assert install["name"] == "install" and install["details"]["wheels"] == len(manifest["wheels"])
    info = probe["details"]
    assert info["spacy_location"].startswith(install["details"]["target"])  # from the wheelhouse, not this environment
    assert info["transformers"] == metadata.version("transformers") and "sla_transformer" in info["spacy_sla_factories"]
    assert train["details"]["parser"] == str((folder / manifest["parser"]["folder"]).resolve())
    assert train["details"]["sla"]["finite_losses"] and train["details"]["vanilla"]["finite_losses"]
