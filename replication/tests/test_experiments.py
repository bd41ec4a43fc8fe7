"""`python -m replication prepare` / prepare_corpus and how `python -m replication experiment`
decides to prepare: the corpus files are replaced together or not at all,
and a record of what they were made from (corpus.json) makes a changed
source or limit prepare them again."""
import hashlib
import json
from pathlib import Path
from typing import Dict, List

import pytest
import spacy
from spacy.tokens import DocBin
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from replication.cli import app as replication_app
from replication.converters import CONVERTER_VERSION, write_atomically
from replication.experiments import CORPUS_RECORD, prepare_corpus, prepared_corpus_is_current
from replication.tasks import TASKS
from spacy_sla.tools.support.conllu import ConversionError

COLA_TASK = TASKS["cola"]
COLA_TRAIN = "".join(f"gj04\t1\t\tTrain sentence {i}.\n" for i in range(5))
COLA_DEV = "".join(f"gj04\t0\t*\tDev sentence {i}.\n" for i in range(3))

runner = CliRunner()


def write_cola(data_dir: Path, train: str = COLA_TRAIN, dev: str = COLA_DEV) -> Path:
    (data_dir / "cola").mkdir(parents=True, exist_ok=True)
    (data_dir / COLA_TASK.train_file).write_text(train, encoding="utf8")
    (data_dir / COLA_TASK.dev_file).write_text(dev, encoding="utf8")
    return data_dir


def texts(path: Path) -> List[str]:
    return [doc.text for doc in DocBin().from_disk(path).get_docs(spacy.blank("en").vocab)]


def snapshot(directory: Path) -> Dict[str, bytes]:
    """Every entry of a directory (hidden ones too) with its bytes."""
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def experiment(data_dir: Path, root: Path, *options: str):
    """`python -m replication experiment cola` without variants: it prepares the corpus
    (or keeps it) and trains nothing."""
    args = ["experiment", "cola", "--data-dir", str(data_dir), "--root", str(root),
            "--variants", "", "--transformer", "unused", *options]
    result = runner.invoke(replication_app, args)
    assert result.exit_code == 0, result.output
    return result


def test_prepare_writes_both_files_and_the_record(tmp_path: Path) -> None:
    data_dir = write_cola(tmp_path / "data")
    output_dir = tmp_path / "corpus"
    train_path, dev_path = prepare_corpus(COLA_TASK, data_dir, output_dir, train_limit=4, dev_limit=2)
    assert texts(train_path) == [f"Train sentence {i}." for i in range(4)]
    assert texts(dev_path) == ["Dev sentence 0.", "Dev sentence 1."]
    # Nothing else is left in the directory (no staging files).
    assert sorted(snapshot(output_dir)) == [CORPUS_RECORD, "dev.spacy", "train.spacy"]
    record = json.loads((output_dir / CORPUS_RECORD).read_text(encoding="utf8"))
    train_bytes = COLA_TRAIN.encode("utf8")
    assert record["source"] == {
        "task": "cola",
        "reader": "cola",
        "converter_version": CONVERTER_VERSION,
        "files": {
            "train": {"file": "cola/in_domain_train.tsv", "size": len(train_bytes),
                      "sha256": hashlib.sha256(train_bytes).hexdigest()},
            "dev": {"file": "cola/out_of_domain_dev.tsv", "size": len(COLA_DEV.encode("utf8")),
                    "sha256": hashlib.sha256(COLA_DEV.encode("utf8")).hexdigest()},
        },
        "train_limit": 4,
        "dev_limit": 2,
        "dev_carved": 0,
    }
    assert record["documents"] == {"train": 4, "dev": 2}
    assert prepared_corpus_is_current(COLA_TASK, data_dir, output_dir, train_limit=4, dev_limit=2)
    assert not prepared_corpus_is_current(COLA_TASK, data_dir, output_dir, train_limit=3, dev_limit=2)
    assert not prepared_corpus_is_current(COLA_TASK, data_dir, output_dir, train_limit=4)


def test_a_failing_train_file_leaves_the_previous_corpus_untouched(tmp_path: Path) -> None:
    data_dir = write_cola(tmp_path / "data")
    output_dir = tmp_path / "corpus"
    prepare_corpus(COLA_TASK, data_dir, output_dir)
    before = snapshot(output_dir)
    # A new dev file that converts, and a training file with a bad label on line 2.
    write_cola(data_dir, train="gj04\t1\t\tFine.\ngj04\t7\t\tBad label.\n", dev="gj04\t1\t\tNew dev.\n")
    with pytest.raises(ConversionError, match=r"in_domain_train.tsv:2: found the label '7'"):
        prepare_corpus(COLA_TASK, data_dir, output_dir)
    # Neither a new dev set beside the old training set nor a half-written file, nor staging leftovers.
    assert snapshot(output_dir) == before
    assert texts(output_dir / "dev.spacy") == [f"Dev sentence {i}." for i in range(3)]


def test_a_failing_first_preparation_writes_no_corpus(tmp_path: Path) -> None:
    data_dir = write_cola(tmp_path / "data", train="gj04\t1\tTruncated.\n")
    output_dir = tmp_path / "corpus"
    with pytest.raises(ConversionError, match=r"in_domain_train.tsv:1: found 3 tab-separated column"):
        prepare_corpus(COLA_TASK, data_dir, output_dir)
    assert not output_dir.exists() or snapshot(output_dir) == {}
    assert not prepared_corpus_is_current(COLA_TASK, data_dir, output_dir)


def test_a_dev_set_carved_from_the_training_file(tmp_path: Path) -> None:
    task = TASKS["sst2"]
    n_carved = task.dev_carved
    data_dir = tmp_path / "data"
    (data_dir / "sst2").mkdir(parents=True)
    lines = [f"sentence {i} \t{i % 2}\n" for i in range(n_carved + 3)]
    (data_dir / task.train_file).write_text("sentence\tlabel\n" + "".join(lines), encoding="utf8")
    train_path, dev_path = prepare_corpus(task, data_dir, tmp_path / "corpus", train_limit=2, dev_limit=5)
    assert texts(dev_path) == [f"sentence {i}" for i in range(5)]
    assert texts(train_path) == [f"sentence {n_carved}", f"sentence {n_carved + 1}"]
    record = json.loads((tmp_path / "corpus" / CORPUS_RECORD).read_text(encoding="utf8"))
    assert list(record["source"]["files"]) == ["train"] and record["source"]["dev_carved"] == n_carved


def test_experiment_prepares_again_only_when_the_record_differs(tmp_path: Path) -> None:
    data_dir = write_cola(tmp_path / "data")
    corpus_dir = tmp_path / "corpus" / "cola"
    train_path = corpus_dir / "train.spacy"

    experiment(data_dir, tmp_path, "--train-limit", "2")
    assert texts(train_path) == ["Train sentence 0.", "Train sentence 1."]
    # The same settings and files: the corpus is kept (a replaced file would be a new inode).
    inode = train_path.stat().st_ino
    experiment(data_dir, tmp_path, "--train-limit", "2")
    assert train_path.stat().st_ino == inode

    # A changed limit prepares again.
    experiment(data_dir, tmp_path, "--train-limit", "1")
    assert texts(train_path) == ["Train sentence 0."]

    # A changed source file prepares again.
    write_cola(data_dir, train="gj04\t1\t\tChanged.\n")
    experiment(data_dir, tmp_path, "--train-limit", "1")
    assert texts(train_path) == ["Changed."]

    # A corpus without a record (e.g. from an older version, or interrupted) is prepared again.
    (corpus_dir / CORPUS_RECORD).unlink()
    inode = train_path.stat().st_ino
    experiment(data_dir, tmp_path, "--train-limit", "1")
    assert train_path.stat().st_ino != inode and (corpus_dir / CORPUS_RECORD).is_file()

    # A damaged record too.
    (corpus_dir / CORPUS_RECORD).write_text("{not json", encoding="utf8")
    experiment(data_dir, tmp_path, "--train-limit", "1")
    assert json.loads((corpus_dir / CORPUS_RECORD).read_text(encoding="utf8"))["source"]["train_limit"] == 1


def test_an_atomic_write_that_fails_keeps_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "train.spacy"
    write_atomically(path, b"old")
    with pytest.raises(TypeError):
        write_atomically(path, "not bytes")  # type: ignore[arg-type]  (fails inside the write)
    assert path.read_bytes() == b"old"
    assert [entry.name for entry in tmp_path.iterdir()] == ["train.spacy"]
    write_atomically(path, b"new")
    assert path.read_bytes() == b"new" and [entry.name for entry in tmp_path.iterdir()] == ["train.spacy"]
