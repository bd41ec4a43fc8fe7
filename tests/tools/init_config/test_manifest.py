"""The manifest of `spacy sla init-config`: the arms `spacy sla ab`
compares, each file's SHA-256 (to tell an edited arm), and the settings in
which an arm may differ from vanilla."""
import hashlib
import json

import pytest

from spacy_sla.tools.init_config.manifest import (
    MANIFEST,
    arm_differences,
    describe_present,
    earlier_files,
    edited_arms,
    manifest_variants,
    read_manifest,
    sha256_of,
    write_manifest,
)


def write_arms(config_dir, *arms):
    config_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for arm in arms:
        paths[arm] = config_dir / f"{arm}.cfg"
        paths[arm].write_text(f"[training]\nmax_steps = 2\n# {arm}\n", encoding="utf8")
    return paths


def test_the_manifest_names_every_arm_with_its_sha256(tmp_path):
    paths = write_arms(tmp_path, "vanilla", "sla", "window")
    path = write_manifest(tmp_path, paths, transformer="trf", added_components=["parser"], options={"threshold": 4})
    assert path == tmp_path / MANIFEST
    manifest = read_manifest(tmp_path)
    assert manifest == json.loads(path.read_text(encoding="utf8"))
    assert manifest["transformer"] == "trf" and manifest["added_components"] == ["parser"]
    assert manifest["options"] == {"threshold": 4} and manifest["source"] is None
    assert manifest["arms"]["sla"] == {"file": "sla.cfg",
                                       "sha256": hashlib.sha256(paths["sla"].read_bytes()).hexdigest()}
    assert sha256_of(paths["sla"]) == manifest["arms"]["sla"]["sha256"]
    assert manifest_variants(tmp_path) == ["sla", "window"]
    assert earlier_files(tmp_path) == {f"{arm}.cfg": sha256_of(paths[arm]) for arm in ("vanilla", "sla", "window")}


def test_an_arm_edited_after_init_config_is_named(tmp_path):
    paths = write_arms(tmp_path, "vanilla", "sla", "window")
    write_manifest(tmp_path, paths, transformer="transformer")
    assert edited_arms(tmp_path, ["vanilla", "sla", "window"]) == []
    paths["window"].write_text("[training]\nmax_steps = 3\n", encoding="utf8")
    assert edited_arms(tmp_path, ["vanilla", "sla", "window"]) == [str(paths["window"])]
    assert edited_arms(tmp_path, ["sla"]) == []


def test_a_folder_without_a_usable_manifest_is_refused(tmp_path):
    with pytest.raises(ValueError, match=rf"\[SLA-E055\].*has no {MANIFEST}"):
        read_manifest(tmp_path)
    assert earlier_files(tmp_path) == {}
    (tmp_path / MANIFEST).write_text("{not json", encoding="utf8")
    with pytest.raises(ValueError, match=rf"\[SLA-E055\].*has an unreadable {MANIFEST}"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({"arms": {"sla": {"file": "sla.cfg"}}}), encoding="utf8")
    with pytest.raises(ValueError, match=r"\[SLA-E055\].*names no vanilla arm"):
        manifest_variants(tmp_path)


def test_the_files_of_an_earlier_call_are_told_from_others(tmp_path):
    paths = write_arms(tmp_path, "vanilla", "sla")
    write_manifest(tmp_path, paths, transformer="transformer")
    (tmp_path / "notes.txt").write_text("mine", encoding="utf8")
    assert describe_present(tmp_path, earlier_files(tmp_path)) == (
        f"{MANIFEST}, sla.cfg, vanilla.cfg (written by an earlier init-config call); notes.txt (not written by "
        "init-config)")


def test_an_arm_may_differ_from_vanilla_only_in_the_transformer_and_the_added_parser():
    vanilla = {"nlp": {"pipeline": ["transformer", "ner"]},
               "components": {"transformer": {"factory": "transformer"}, "ner": {"factory": "ner"}},
               "training": {"dropout": 0.1, "score_weights": {"ents_f": 1.0}}}
    sla = {"nlp": {"pipeline": ["parser", "transformer", "ner"]}, "paths": {"parser": "en_core_web_sm"},
           "components": {"transformer": {"factory": "sla_transformer", "model": {"threshold": 3}},
                          "ner": {"factory": "ner"}, "parser": {"source": "${paths.parser}"}},
           "training": {"dropout": 0.1, "score_weights": {"ents_f": 1.0, "dep_las": None}}}
    assert arm_differences(vanilla, sla, "transformer", added_components=["parser"]) == []
    # without the parser counted as added, its blocks, names and paths are differences
    assert arm_differences(vanilla, sla, "transformer") == [
        "components.parser.source", "nlp.pipeline", "paths.parser", "training.score_weights.dep_las"]
    sla["training"]["dropout"] = 0.3
    sla["components"]["ner"]["factory"] = "beam_ner"
    assert arm_differences(vanilla, sla, "transformer", added_components=["parser"]) == [
        "components.ner.factory", "training.dropout"]
