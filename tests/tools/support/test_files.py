"""Atomic writes and the fingerprints that tell a file or a pipeline from
another one put at its path."""
import hashlib
import os

import pytest

from spacy_sla.tools.support.files import file_fingerprint, pipeline_fingerprint, write_atomically


def test_write_atomically_replaces_the_content_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "out" / "shard.spacy"
    write_atomically(path, b"old")
    write_atomically(path, b"new content")
    assert path.read_bytes() == b"new content"
    assert sorted(p.name for p in path.parent.iterdir()) == ["shard.spacy"]


def test_a_failed_write_keeps_the_old_content(tmp_path):
    path = tmp_path / "shard.spacy"
    write_atomically(path, b"old")
    with pytest.raises(TypeError):
        write_atomically(path, "not bytes")  # type: ignore[arg-type]
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["shard.spacy"]


def test_the_written_file_has_the_umask_permissions(tmp_path):
    umask = os.umask(0o022)
    try:
        write_atomically(tmp_path / "a", b"x")
    finally:
        os.umask(umask)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o644


def test_the_fingerprint_of_a_file_is_its_size_and_sha256(tmp_path):
    path = tmp_path / "train.spacy"
    path.write_bytes(b"abc")
    assert file_fingerprint(path) == {"size": 3, "sha256": hashlib.sha256(b"abc").hexdigest()}


def test_the_fingerprint_of_a_directory_covers_its_spacy_files_in_order(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "2.spacy").write_bytes(b"22")
    (tmp_path / "1.spacy").write_bytes(b"1")
    (tmp_path / "notes.txt").write_bytes(b"ignored")
    assert file_fingerprint(tmp_path) == {"size": 3, "sha256": hashlib.sha256(b"1" + b"22").hexdigest()}


def test_a_pipeline_fingerprint_hashes_meta_and_config_and_dates_the_rest(tmp_path):
    (tmp_path / "meta.json").write_text("{}")
    (tmp_path / "config.cfg").write_text("[nlp]")
    (tmp_path / "transformer").mkdir()
    weights = tmp_path / "transformer" / "model"
    weights.write_bytes(b"0" * 10)
    os.utime(weights, ns=(1_000_000_000, 2_000_000_000))
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "x.pyc").write_bytes(b"x")
    assert pipeline_fingerprint(tmp_path) == {
        "config.cfg": {"size": 5, "sha256": hashlib.sha256(b"[nlp]").hexdigest()},
        "meta.json": {"size": 2, "sha256": hashlib.sha256(b"{}").hexdigest()},
        "transformer/model": {"size": 10, "mtime_ns": 2_000_000_000},
    }


def test_a_pipeline_rewritten_at_the_same_path_has_another_fingerprint(tmp_path):
    (tmp_path / "config.cfg").write_text("[nlp]\nlang = en")
    before = pipeline_fingerprint(tmp_path)
    (tmp_path / "config.cfg").write_text("[nlp]\nlang = de")
    assert pipeline_fingerprint(tmp_path) != before
