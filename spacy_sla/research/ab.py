"""`spacy sla ab`: does SLA help *this* pipeline? The reference (vanilla)
and each attention variant of a user's configs (`spacy sla init-config`)
trained with every seed by `spacy train`, each model scored on the dev set
(research/dev_evaluation.py), and one report (research/ab_report.py).

Layout of OUTPUT_DIR:

    plan.json                    what the comparison is: configs, data, seeds, sizes, overrides
    data/train-N.spacy           with --train-sizes: the nested samples, data/samples.json says how drawn
    [size-N/]VARIANT/seedS/      one run: train-config.cfg (what `spacy train` ran), run.json (settings,
                                 training data fingerprint, training seconds), train-log.jsonl (the dev
                                 curve), model-last, model-best, dev-evaluation.json (scores, speed,
                                 per-document statistics), with --by-mask dev-mask-strata.json, *.log
    report.md, report.json, report.png

A run that finished with the same settings on the same training data is
kept, not trained again; an evaluation of the same model file, dev file and
draws is kept too, so the command can be rerun after an interruption or with
more seeds or sizes. The report needs a run's records, not its models: with
--drop-models each run's models are deleted once it is scored, and a run
whose records are complete is kept without them (the output directory, a few
MB without data/ and the models, is then the comparison's record).

Safety: one call holds OUTPUT_DIR at a time (ab_lock.py); SIGTERM or SIGINT
stops the training child's process group and leaves its run unrecorded
(stop_on_signals); the arms are those CONFIG_DIR's manifest names, each
differing from vanilla only in attention, and every arm's attention settings
and the data are checked before the first run trains (AbPlan.check); ab
overwrites only the plan and report files it wrote itself (.ab-files.json).
"""
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy
import srsly
from spacy.tokens import Doc, DocBin
from spacy.util import load_config
from spacy.vocab import Vocab
from thinc.api import Config

from ..errors import Errors
from ..files import file_fingerprint, write_atomically
from .dev_evaluation import EVALUATION_VERSION
from .mask_strata import STRATA_FILE, NoLocalMaskError, kept_strata
from .pipeline_configs import (
    REFERENCE,
    arm_differences,
    check_attention_model,
    read_manifest,
    transformer_layer_count,
)

PLAN = "plan.json"
RUN_SETTINGS = "run.json"
RUN_CONFIG = "train-config.cfg"
TRAIN_LOG = "train-log.jsonl"  # spaCy's ConsoleLogger.v3 output: one JSON line per evaluation
EVALUATION = "dev-evaluation.json"
SAMPLES = "samples.json"
MODELS = ("model-last", "model-best")  # what `spacy train` saves in a run directory
ALL = "all"
REPORT = "report"
INTERIM_REPORT = "report-interim"  # --report-only while another call holds OUTPUT_DIR
REPORT_SUFFIXES = (".md", ".json", ".png")
AB_FILES = ".ab-files.json"  # the plan and report files ab wrote, by SHA-256: the only ones it overwrites
INTERIM_FILES = ".ab-interim-files.json"  # the same for the interim report, written beside a running call
STOP_GRACE_SECONDS = 20  # how long a stopped training child may take to exit before it is killed
CORPUS_READER = "spacy.Corpus.v1"


def report_names(stem: str = REPORT) -> List[str]:
    return [stem + suffix for suffix in REPORT_SUFFIXES]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _is_ab_plan(path: Path) -> bool:
    """Whether path is a plan.json that ab wrote (by its content)."""
    try:
        plan = json.loads(path.read_text(encoding="utf8"))
    except (OSError, ValueError):
        return False
    return isinstance(plan, dict) and plan.get("reference") == REFERENCE and {"config_dir", "variants",
                                                                             "configs"} <= set(plan)


def foreign_outputs(output_dir: Path, names: Sequence[str], record: str = AB_FILES) -> List[str]:
    """The files of `names` in output_dir that ab did not write: not in its
    record with their content. An output directory of a version of ab that
    kept no record is recognised by its plan.json."""
    present = [name for name in names if (output_dir / name).exists()]
    if not present:
        return []
    record_path = output_dir / record
    if not record_path.exists():
        if _is_ab_plan(output_dir / PLAN):
            return []
        return present
    try:
        written = json.loads(record_path.read_text(encoding="utf8"))
    except ValueError:
        written = {}
    return [name for name in present
            if not (output_dir / name).is_file() or written.get(name) != _sha256(output_dir / name)]


def check_outputs(output_dir: Path, names: Sequence[str], record: str = AB_FILES) -> None:
    """[E064] unless every file of names in output_dir is one ab wrote."""
    foreign = foreign_outputs(output_dir, names, record)
    if foreign:
        raise ValueError(Errors.E064.format(files=", ".join(foreign), output_dir=output_dir, record=record))


def record_outputs(output_dir: Path, paths: Sequence[Path], record: str = AB_FILES) -> None:
    """Add files ab has just written to its record, so a later call may replace them."""
    record_path = output_dir / record
    try:
        written = json.loads(record_path.read_text(encoding="utf8")) if record_path.exists() else {}
    except ValueError:
        written = {}
    written.update({path.name: _sha256(path) for path in paths})
    write_atomically(record_path, json.dumps(written, indent=2, sort_keys=True).encode("utf8"))


def corpus_documents(path: Path, which: str, reader: Optional[str] = CORPUS_READER) -> Optional[int]:
    """The number of documents of a training or dev corpus, or [E062] when
    its reader cannot read it: a missing path, a file that is not a .spacy
    DocBin, a directory without one. For another reader than
    spacy.Corpus.v1 only that the path can be read (None documents)."""
    if not path.exists():
        raise ValueError(Errors.E062.format(path=path, which=which, reason="it does not exist"))
    if not os.access(path, os.R_OK):
        raise ValueError(Errors.E062.format(path=path, which=which, reason="it cannot be read (permissions)"))
    if reader != CORPUS_READER:
        return None
    if path.is_dir():
        files = sorted(path.rglob("*.spacy"))
        if not files:
            raise ValueError(Errors.E062.format(path=path, which=which, reason="the directory holds no .spacy file"))
    elif path.suffix != ".spacy":
        raise ValueError(Errors.E062.format(path=path, which=which, reason="it is not a .spacy file"))
    else:
        files = [path]
    count = 0
    for file_path in files:
        try:
            count += len(DocBin().from_disk(file_path))
        except Exception as error:  # zlib, msgpack or a permission error: a file spaCy cannot read
            raise ValueError(Errors.E062.format(path=path, which=which, reason=(
                f"{file_path} is not a DocBin spaCy can read ({type(error).__name__}: {error})"))) from None
    return count


class AbInterrupted(BaseException):
    """SIGTERM or SIGINT reached `spacy sla ab`. A BaseException, as
    KeyboardInterrupt, so that execute(), which reports a failed run and
    goes on with the grid, lets it through."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.run_name: Optional[str] = None


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGINT into AbInterrupted while the block runs (in
    the main thread; elsewhere signals cannot be handled), so that the
    training child is stopped (run_command) and the lock released on the
    way out; a second signal while that happens is ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = (signal.SIGTERM, signal.SIGINT)

    def interrupt(signum: int, frame: Any) -> None:
        for other in stopping:
            signal.signal(other, signal.SIG_IGN)
        raise AbInterrupted(signum)

    previous = {signum: signal.signal(signum, interrupt) for signum in stopping}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def read_docbin_corpus(path: Path) -> List[Doc]:
    """The documents of a .spacy file or of every .spacy file under a
    directory (in path order, as spacy.Corpus.v1 reads them)."""
    files = sorted(path.rglob("*.spacy")) if path.is_dir() else [path]
    vocab = Vocab()
    return [doc for file_path in files for doc in DocBin().from_disk(file_path).get_docs(vocab)]


def parse_sizes(values: Sequence[str]) -> List[Optional[int]]:
    """--train-sizes 500,2000,all -> [500, 2000, None]; None is the whole set."""
    sizes: List[Optional[int]] = []
    for value in values:
        if value == ALL:
            sizes.append(None)
        elif value.isdigit() and int(value) > 0:
            sizes.append(int(value))
        else:
            raise ValueError(Errors.E037.format(size=value, path="the training corpus",
                                                reason="not a whole number > 0 or \"all\""))
    return sorted(set(sizes), key=lambda size: float("inf") if size is None else size)


def size_label(size: Optional[int]) -> str:
    return ALL if size is None else str(size)


def _override_value(raw: str) -> Any:
    """A value as spaCy's CLI reads one: JSON where it parses, else the string."""
    try:
        return srsly.json_loads(raw)
    except ValueError:
        return raw


def parse_size_overrides(values: Sequence[str]) -> Dict[Optional[int], Dict[str, Any]]:
    """--size-override 2000:training.max_steps=800 (repeatable; several
    settings joined by commas; "all" for the whole set) -> {2000:
    {"training.max_steps": 800}}. Values are read as spaCy reads
    `--section.key value` overrides, so a list may hold commas."""
    overrides: Dict[Optional[int], Dict[str, Any]] = {}
    for value in values:
        label, _, settings = value.partition(":")
        label = label.strip()
        if not ((label == ALL or (label.isdigit() and int(label) > 0)) and settings.strip()):
            raise ValueError(Errors.E043.format(size=value, sizes="the ones of --train-sizes",
                                                reason="it is not SIZE:KEY=VALUE[,KEY=VALUE]"))
        size = None if label == ALL else int(label)
        for setting in re.split(r",(?=\s*[\w.-]+\s*=)", settings):
            key, equals, raw = setting.strip().partition("=")
            if not (equals and key.strip() and raw.strip()):
                raise ValueError(Errors.E043.format(size=value, sizes="the ones of --train-sizes",
                                                    reason=f"'{setting.strip()}' is not KEY=VALUE"))
            overrides.setdefault(size, {})[key.strip()] = _override_value(raw.strip())
    return overrides


def draw_training_samples(train_path: Path, sizes: Sequence[Optional[int]], data_dir: Path, sample_seed: int
                          ) -> Dict[Optional[int], Path]:
    """One file per size below the whole set: the first N documents of one
    permutation of the corpus (numpy's default_rng(sample_seed)), so the
    samples are nested and the same for every variant and seed. Kept while
    the corpus, the seed and the sizes are the same (data/samples.json)."""
    paths: Dict[Optional[int], Path] = {size: data_dir / f"train-{size}.spacy" for size in sizes if size is not None}
    if not paths:
        return {None: train_path}
    if not train_path.exists() or not (train_path.is_dir() or train_path.suffix == ".spacy"):
        raise ValueError(Errors.E037.format(size=max(paths), path=train_path,
                                            reason="it is not a .spacy file or a directory of them"))
    record = {"source": str(train_path), "fingerprint": file_fingerprint(train_path), "sample_seed": sample_seed,
              "sizes": sorted(paths)}
    record_path = data_dir / SAMPLES
    if record_path.exists() and all(path.exists() for path in paths.values()):
        kept = json.loads(record_path.read_text(encoding="utf8"))
        if {key: kept.get(key) for key in record} == record:
            return {**paths, **({None: train_path} if None in sizes else {})}
    docs = read_docbin_corpus(train_path)
    n_documents = len(docs)
    too_large = [size for size in paths if size >= n_documents]
    if too_large:
        raise ValueError(Errors.E037.format(size=min(too_large), path=train_path,
                                            reason=f"it has {n_documents} documents"))
    order = numpy.random.default_rng(sample_seed).permutation(n_documents)
    for size, path in paths.items():
        sample = DocBin(store_user_data=True, docs=[docs[index] for index in order[:size]])
        write_atomically(path, sample.to_bytes())
    write_atomically(record_path, json.dumps({**record, "documents": n_documents,
                                              "order_head": order[:20].tolist()}, indent=2).encode("utf8"))
    return {**paths, **({None: train_path} if None in sizes else {})}


@dataclass(frozen=True)
class AbRun:
    """One (size, variant, seed) of the comparison, with what training and
    evaluating it need."""

    variant: str
    seed: int
    size: Optional[int]
    config_path: Path
    output_dir: Path
    train_path: Path
    dev_path: Path
    overrides: Dict[str, Any] = field(default_factory=dict)
    sizes_compared: bool = False  # whether the comparison has --train-sizes (then runs sit under size-N/)
    gpu_id: int = -1
    model: str = "last"  # "last" or "best": the model that is scored
    resamples: int = 10000
    random_seed: int = 0
    sample_seed: int = 0  # the draw of the training sample, for a size below the whole set
    # what is done after the evaluation; neither changes the run's result, so neither is a setting
    by_mask: bool = False  # record which dev documents the mask restricts (needs the model)
    drop_models: bool = False  # then delete the models, keeping the records the report needs

    @property
    def name(self) -> str:
        return (f"size {size_label(self.size)}/" if self.sizes_compared else "") + f"{self.variant}/seed{self.seed}"

    @property
    def run_dir(self) -> Path:
        base = self.output_dir / f"size-{size_label(self.size)}" if self.sizes_compared else self.output_dir
        return base / self.variant / f"seed{self.seed}"

    @property
    def model_dir(self) -> Path:
        return self.run_dir / f"model-{self.model}"

    def settings(self) -> Dict[str, Any]:
        """What makes two runs the same run: a finished run with equal settings is kept."""
        settings = {
            "variant": self.variant, "seed": self.seed, "size": self.size,
            "config": str(self.config_path), "config_sha256": file_fingerprint(self.config_path)["sha256"],
            "train": str(self.train_path), "dev": str(self.dev_path), "overrides": self.overrides,
            "gpu_id": self.gpu_id,
        }
        if self.size is not None:  # a sample drawn with another seed is another training set at the same path
            settings["sample_seed"] = self.sample_seed
        return settings

    def train_command(self) -> List[str]:
        return [sys.executable, "-m", "spacy", "train", str(self.run_dir / RUN_CONFIG), "--output",
                str(self.run_dir), "--gpu-id", str(self.gpu_id)]

    def evaluate_command(self) -> List[str]:
        return evaluation_command(self.model_dir, self.dev_path, self.run_dir / EVALUATION, self.gpu_id,
                                  self.resamples, self.random_seed)


def has_setting(config: Dict[str, Any], dotted: str) -> bool:
    node: Any = config
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def run_config(run: AbRun) -> Config:
    """The variant's config with the run's data, seed and overrides, and a
    second logger beside the config's own that keeps every evaluation as a
    JSON line (spaCy's ConsoleLogger.v3 with an output file, chained with
    spacy-loggers' ChainLogger.v1), so the report can show the dev curve."""
    config = load_config(run.config_path, interpolate=False)
    settings = {"paths.train": str(run.train_path), "paths.dev": str(run.dev_path), "system.seed": run.seed}
    settings.update({key: value for key, value in run.overrides.items() if has_setting(config, key)})
    config = load_config(run.config_path, overrides=settings, interpolate=False)
    training = config["training"]
    training["logger"] = {
        "@loggers": "spacy.ChainLogger.v1",
        "logger1": training.get("logger") or {"@loggers": "spacy.ConsoleLogger.v1", "progress_bar": False},
        "logger2": {"@loggers": "spacy.ConsoleLogger.v3", "progress_bar": None, "console_output": False,
                    "output_file": str(run.run_dir / TRAIN_LOG)},
    }
    return config


def stop_process_group(process: "subprocess.Popen[bytes]") -> None:
    """Stop a child started in its own session and whatever it started:
    SIGTERM to its process group, SIGKILL after STOP_GRACE_SECONDS, and a
    SIGKILL to what is left of the group once the child has exited."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        process.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def run_command(command: List[str], log_path: Optional[Path]) -> None:
    """Run a command, failing with CalledProcessError; its output goes to
    the terminal or, with log_path, to that file (a Ray worker has no
    terminal, and a failed run is reported with the log's tail). The
    command runs in a process group of its own, stopped with it when this
    process is interrupted (AbInterrupted, KeyboardInterrupt), so that no
    training goes on without the call that records it."""
    log = None
    try:
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log = log_path.open("w", encoding="utf8")
        process = subprocess.Popen(command, stdout=log, stderr=None if log is None else subprocess.STDOUT,
                                   start_new_session=True)
        try:
            returncode = process.wait()
        except BaseException:
            stop_process_group(process)
            raise
    finally:
        if log is not None:
            log.close()
    if returncode:
        raise subprocess.CalledProcessError(returncode, command)


def finished_settings(run: AbRun) -> Optional[Dict[str, Any]]:
    """run.json of a run that finished with the same settings on the same
    training data, else None. A run counts as finished while it has its
    model or, once --drop-models deleted that, its evaluation."""
    path = run.run_dir / RUN_SETTINGS
    if not (path.exists() and (run.model_dir.exists() or (run.run_dir / EVALUATION).exists())):
        return None
    record = json.loads(path.read_text(encoding="utf8"))
    if record.get("settings") != run.settings():
        return None
    # a corpus rewritten at the same path (or another one sampled into data/) is other training data;
    # records written before the fingerprint was kept are taken on their settings alone
    if "train_data" in record and record["train_data"] != file_fingerprint(run.train_path):
        return None
    return record


def train(run: AbRun, log_path: Optional[Path] = None, force: bool = False) -> Dict[str, Any]:
    """Train one run with `spacy train` (unless it finished before with the
    same settings); returns its run.json."""
    if not force:
        kept = finished_settings(run)
        if kept is not None:
            return {**kept, "kept": True}
    run.run_dir.mkdir(parents=True, exist_ok=True)
    (run.run_dir / RUN_SETTINGS).unlink(missing_ok=True)
    (run.run_dir / EVALUATION).unlink(missing_ok=True)
    (run.run_dir / TRAIN_LOG).unlink(missing_ok=True)  # spaCy's logger would refuse to overwrite it
    (run.run_dir / STRATA_FILE).unlink(missing_ok=True)
    write_atomically(run.run_dir / RUN_CONFIG, run_config(run).to_str(interpolate=False).encode("utf8"))
    started = time.perf_counter()
    run_command(run.train_command(), log_path)
    record = {"settings": run.settings(), "train_data": file_fingerprint(run.train_path),
              "train_seconds": round(time.perf_counter() - started, 2)}
    write_atomically(run.run_dir / RUN_SETTINGS, json.dumps(record, indent=2).encode("utf8"))
    return record


def evaluation_command(model_dir: Path, dev_path: Path, output: Path, gpu_id: int = -1, resamples: int = 10000,
                       random_seed: int = 0) -> List[str]:
    return [sys.executable, "-m", "spacy_sla.research.dev_evaluation", str(model_dir), str(dev_path), str(output),
            "--gpu-id", str(gpu_id), "--resamples", str(resamples), "--random-seed", str(random_seed)]


def evaluate_saved_model(
    model_dir: Path,
    dev_path: Path,
    output: Path,
    *,
    gpu_id: int = -1,
    resamples: int = 10000,
    random_seed: int = 0,
    log_path: Optional[Path] = None,
) -> Dict[str, Any]:
    """Score a saved pipeline on a dev set (dev_evaluation in its own
    process: `spacy evaluate`'s scores, the speed, the per-document
    statistics) into output, or read the evaluation made there before of
    the same model, dev file and draws."""
    key = {"version": EVALUATION_VERSION, "model": file_fingerprint(model_dir / "meta.json"),
           "dev": file_fingerprint(dev_path), "resamples": resamples, "random_seed": random_seed}
    if output.exists():
        kept = json.loads(output.read_text(encoding="utf8"))
        if kept.get("key") == key:
            return kept
    run_command(evaluation_command(model_dir, dev_path, output, gpu_id, resamples, random_seed), log_path)
    evaluation = json.loads(output.read_text(encoding="utf8"))
    evaluation["key"] = key
    write_atomically(output, json.dumps(evaluation).encode("utf8"))
    return evaluation


def evaluate(run: AbRun, log_path: Optional[Path] = None) -> Dict[str, Any]:
    """The run's model on the dev set (evaluate_saved_model); once the model
    is deleted, the evaluation recorded before (train() deletes it when the
    run trains again, so it belongs to this run's model)."""
    if not run.model_dir.exists():
        path = run.run_dir / EVALUATION
        if not path.exists():
            raise ValueError(Errors.E044.format(run_dir=run.run_dir, model=run.model_dir,
                                                record=f"evaluation ({EVALUATION})"))
        return json.loads(path.read_text(encoding="utf8"))
    return evaluate_saved_model(run.model_dir, run.dev_path, run.run_dir / EVALUATION, gpu_id=run.gpu_id,
                                resamples=run.resamples, random_seed=run.random_seed, log_path=log_path)


def record_mask_strata(run: AbRun) -> None:
    """Which dev documents the run's mask restricts (kept_strata), while the
    model is there; the reference has no local mask to ask."""
    if run.variant == REFERENCE:
        return
    try:
        kept_strata(run.model_dir, run.dev_path, run.run_dir)
    except NoLocalMaskError:
        pass  # recorded as such; the report names the variant as left out


def drop_models(run: AbRun) -> None:
    for name in MODELS:
        shutil.rmtree(run.run_dir / name, ignore_errors=True)


def training_curve(run: AbRun) -> List[Dict[str, Any]]:
    """The weighted dev score and the logged scores (fractions) at every
    evaluation of the run, from spaCy's JSON lines."""
    path = run.run_dir / TRAIN_LOG
    if not path.exists():
        return []
    curve = []
    for line in path.read_text(encoding="utf8").splitlines():
        if line.strip():
            entry = json.loads(line)
            curve.append({"step": entry["step"], "score": entry["score"],
                          "scores": {key: value / 100 for key, value in entry.get("scores", {}).items()
                                     if key != "speed" and isinstance(value, (int, float))}})
    return curve


@dataclass
class AbPlan:
    """Everything `spacy sla ab` was asked to compare."""

    config_dir: Path
    output_dir: Path
    train_path: Path
    dev_path: Path
    variants: List[str]
    seeds: List[int]
    sizes: List[Optional[int]] = field(default_factory=lambda: [None])
    sample_seed: int = 0
    overrides: Dict[str, Any] = field(default_factory=dict)
    gpu_id: int = -1
    model: str = "last"
    resamples: int = 10000
    random_seed: int = 0
    # settings for one training size on top of `overrides`: a larger sample
    # usually needs a longer budget to converge
    size_overrides: Dict[Optional[int], Dict[str, Any]] = field(default_factory=dict)
    by_mask: bool = False  # each run records its mask strata (AbRun.by_mask)
    drop_models: bool = False  # each run deletes its models once its records are written

    @property
    def arms(self) -> List[str]:
        """The reference first, then the variants."""
        return [REFERENCE] + [variant for variant in self.variants if variant != REFERENCE]

    def config_path(self, variant: str) -> Path:
        return self.config_dir / f"{variant}.cfg"

    def check(self, train_data: bool = True) -> None:
        """Refuse what cannot work before anything is trained: a variant the
        manifest of CONFIG_DIR does not name, a missing or unreadable arm
        config, an arm that differs from vanilla in more than attention,
        attention settings the builders refuse, an override no config has,
        training data the reader cannot read or too small for a size, a dev
        set without documents or without the annotation the configs' scores
        need, plan or report files in OUTPUT_DIR that ab did not write.
        train_data=False leaves the training data out (--report-only reads
        records)."""
        manifest = read_manifest(self.config_dir)
        unknown = [variant for variant in self.arms if variant not in manifest["arms"]]
        if unknown:
            raise ValueError(Errors.E056.format(variants=", ".join(unknown), config_dir=self.config_dir,
                                                known=", ".join(manifest["arms"])))
        for variant in self.arms:
            if not self.config_path(variant).is_file():
                raise ValueError(Errors.E039.format(variant=variant, config_dir=self.config_dir,
                                                    path=self.config_path(variant)))
        configs = [self._read_config(variant) for variant in self.arms]
        transformer = str(manifest.get("transformer", "transformer"))
        added = list(manifest.get("added_components", []))
        for variant, config in zip(self.arms[1:], configs[1:]):
            differing = arm_differences(configs[0], config, transformer, added)
            if differing:
                shown = ", ".join(differing[:12]) + (f" and {len(differing) - 12} more" if len(differing) > 12 else "")
                raise ValueError(Errors.E058.format(path=self.config_path(variant), variant=variant,
                                                    reference=self.config_path(REFERENCE), keys=shown,
                                                    transformer=transformer, config_dir=self.config_dir))
        for variant in self.arms:
            self._check_attention(variant, transformer)
        for size, settings in self.size_overrides.items():
            if size not in self.sizes:
                raise ValueError(Errors.E043.format(size=size_label(size),
                                                    sizes=", ".join(size_label(s) for s in self.sizes),
                                                    reason="it is not one of --train-sizes"))
        keys = set(self.overrides).union(*self.size_overrides.values())
        for key in sorted(keys):
            if not any(has_setting(config, key) for config in configs):
                raise ValueError(f"None of the configs in {self.config_dir} has the setting {key} to override.")
        if train_data:
            self._check_training_data(configs[0])
        corpus_documents(self.dev_path, "dev", _reader(configs[0], "dev"))
        check_dev_annotation(self.dev_path, configs[0])
        check_outputs(self.output_dir, [PLAN, *report_names()])

    def _read_config(self, variant: str) -> Config:
        path = self.config_path(variant)
        try:
            return load_config(path, interpolate=False)
        except Exception as error:  # thinc's and configparser's errors name the file '<string>'
            raise ValueError(Errors.E057.format(path=path, variant=variant, config_dir=self.config_dir,
                                                reason=" ".join(f"{type(error).__name__}: {error}".split()))) from None

    def _check_attention(self, variant: str, transformer: str) -> None:
        """The arm's attention as training builds it: the config with the
        run's settings (the overrides of every size), interpolated, its
        mask built and its sla_layers checked against the model's layers."""
        path = self.config_path(variant)
        for size in self.sizes:
            config = load_config(path, interpolate=False)
            settings = {"paths.train": str(self.train_path), "paths.dev": str(self.dev_path),
                        **self.overrides_at(size)}
            settings = {key: value for key, value in settings.items() if has_setting(config, key)}
            try:
                resolved = load_config(path, overrides=settings, interpolate=True)
            except Exception as error:
                raise ValueError(Errors.E057.format(path=path, variant=variant, config_dir=self.config_dir,
                                                    reason=" ".join(f"{type(error).__name__}: {error}".split())
                                                    )) from None
            block = resolved.get("components", {}).get(transformer)
            if not isinstance(block, dict) or not isinstance(block.get("model"), dict):
                continue  # not an init-config transformer block: nothing of attention to build
            model = block["model"]
            n_layers = transformer_layer_count(model.get("name")) if model.get("sla_layers") is not None else None
            try:
                check_attention_model(model, n_layers)
            except ValueError as error:
                raise ValueError(Errors.E065.format(variant=variant, path=path, reason=str(error))) from None

    def _check_training_data(self, config: Dict[str, Any]) -> None:
        """[E062] for training data its reader cannot read or without
        documents; [E037] for a training size the corpus cannot give."""
        samples = [size for size in self.sizes if size is not None]
        reader = CORPUS_READER if samples else _reader(config, "train")
        documents = corpus_documents(self.train_path, "train", reader)
        if documents == 0:
            raise ValueError(Errors.E062.format(path=self.train_path, which="train", reason="it has no documents"))
        too_large = [size for size in samples if documents is not None and size >= documents]
        if too_large:
            raise ValueError(Errors.E037.format(size=min(too_large), path=self.train_path,
                                                reason=f"it has {documents} documents"))

    def runs(self, training_files: Optional[Dict[Optional[int], Path]] = None) -> List[AbRun]:
        """Size by size, seed by seed, the reference first: an interrupted
        comparison has its finished runs paired."""
        files = training_files or {size: self.output_dir / "data" / f"train-{size}.spacy" if size else self.train_path
                                   for size in self.sizes}
        return [
            AbRun(variant, seed, size, self.config_path(variant), self.output_dir, files[size], self.dev_path,
                  self.overrides_at(size), len(self.sizes) > 1 or self.sizes != [None], self.gpu_id, self.model,
                  self.resamples, self.random_seed, self.sample_seed, by_mask=self.by_mask,
                  drop_models=self.drop_models)
            for size in self.sizes for seed in self.seeds for variant in self.arms
        ]

    def overrides_at(self, size: Optional[int]) -> Dict[str, Any]:
        """The settings of a run at this training size: the size's own over the common ones."""
        return {**self.overrides, **self.size_overrides.get(size, {})}

    def to_json(self) -> Dict[str, Any]:
        return {
            "config_dir": str(self.config_dir), "reference": REFERENCE, "variants": self.arms,
            "configs": {variant: {"path": str(self.config_path(variant)),
                                  **file_fingerprint(self.config_path(variant))} for variant in self.arms},
            "train": str(self.train_path), "dev": str(self.dev_path), "seeds": self.seeds,
            "train_sizes": [size_label(size) for size in self.sizes], "sample_seed": self.sample_seed,
            "overrides": self.overrides,
            "size_overrides": {size_label(size): self.size_overrides[size]
                               for size in self.sizes if size in self.size_overrides},
            "model": self.model, "resamples": self.resamples,
            "random_seed": self.random_seed, "gpu_id": self.gpu_id,
        }


# score key prefix -> (what the dev Docs must have, the Doc check)
ANNOTATION_NEEDED: Dict[str, Any] = {
    "ents_": ("entities", lambda doc: doc.has_annotation("ENT_IOB")),
    "cats_": ("text categories (doc.cats)", lambda doc: bool(doc.cats)),
    "tag_": ("fine-grained tags (token.tag_)", lambda doc: doc.has_annotation("TAG")),
    "pos_": ("coarse-grained tags (token.pos_)", lambda doc: doc.has_annotation("POS")),
    "morph_": ("morphological features (token.morph)", lambda doc: doc.has_annotation("MORPH")),
    "lemma_": ("lemmas (token.lemma_)", lambda doc: doc.has_annotation("LEMMA")),
    "dep_": ("a dependency parse", lambda doc: doc.has_annotation("DEP")),
    "sents_": ("sentence boundaries", lambda doc: doc.has_annotation("SENT_START")),
}


def _reader(config: Dict[str, Any], which: str) -> Optional[str]:
    """The reader of [corpora.train] or [corpora.dev], spacy.Corpus.v1 when
    the config does not say (then `spacy train` fails on its own)."""
    block = config.get("corpora", {}).get(which)
    return block.get("@readers", CORPUS_READER) if isinstance(block, dict) else CORPUS_READER


def weighted_scores(config: Dict[str, Any]) -> List[str]:
    """The keys of the config's score weights that count (a weight other than 0 or null)."""
    return [key for key, value in config.get("training", {}).get("score_weights", {}).items() if value]


def check_dev_annotation(dev_path: Path, config: Dict[str, Any]) -> None:
    """[E031] for a dev set without documents; [E036] for one whose documents
    lack the annotation a weighted score needs (checked for spaCy's own
    score families on .spacy dev sets; others are checked after evaluation)."""
    if not dev_path.exists() or not (dev_path.is_dir() or dev_path.suffix == ".spacy"):
        return
    docs = read_docbin_corpus(dev_path)
    if not docs:
        raise ValueError(Errors.E031.format(path=dev_path))
    for key in weighted_scores(config):
        for prefix, (what, present) in ANNOTATION_NEEDED.items():
            if key.startswith(prefix) and not any(present(doc) for doc in docs):
                raise ValueError(Errors.E036.format(key=key, dev=dev_path) + f" (no document has {what})")
        if key.startswith("spans_"):
            spans_key = key[len("spans_"):].rsplit("_", 1)[0]
            if not any(spans_key in doc.spans for doc in docs):
                raise ValueError(Errors.E036.format(key=key, dev=dev_path) + f" (no document has doc.spans['{spans_key}'])")


def prepare(plan: AbPlan) -> List[AbRun]:
    """Check the plan, draw the training samples and record the plan."""
    plan.check()
    files = draw_training_samples(plan.train_path, plan.sizes, plan.output_dir / "data", plan.sample_seed)
    write_atomically(plan.output_dir / PLAN, json.dumps(plan.to_json(), indent=2).encode("utf8"))
    record_outputs(plan.output_dir, [plan.output_dir / PLAN])
    return plan.runs(files)


@dataclass
class AbResult:
    run: AbRun
    status: str  # "trained", "kept" or "failed"
    seconds: float
    record: Optional[Dict[str, Any]] = None  # run.json with the evaluation's scores
    error: str = ""
    log_tail: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "failed"


def execute(run: AbRun, working_dir: Optional[str] = None, logs: bool = False) -> AbResult:
    """Train and evaluate one run; never raises for a failed run (its
    result says why), so a grid goes on. With logs, the commands' output
    goes to the run's train.log and evaluate.log."""
    started = time.perf_counter()
    previous = os.getcwd()
    if working_dir is not None:
        if not Path(working_dir).is_dir():
            return AbResult(run, "failed", 0.0, error=f"the working directory {working_dir} is not on this node")
        os.chdir(working_dir)
    stage = "train"
    try:
        record = train(run, run.run_dir / "train.log" if logs else None)
        kept = bool(record.get("kept"))  # train() checked finished_settings (a hash of the training data) once
        stage = "evaluate"
        evaluation = evaluate(run, run.run_dir / "evaluate.log" if logs else None)
        if run.by_mask:
            stage = "split the dev set by mask"
            record_mask_strata(run)
        if run.drop_models:
            drop_models(run)
        return AbResult(run, "kept" if kept else "trained", time.perf_counter() - started,
                         record={**record, "scores": evaluation["scores"]})
    except subprocess.CalledProcessError as error:
        log = run.run_dir / f"{stage}.log"
        tail = "\n".join(log.read_text(encoding="utf8", errors="replace").splitlines()[-25:]) if log.exists() else ""
        return AbResult(run, "failed", time.perf_counter() - started,
                         error=f"`{stage}` exited with status {error.returncode}", log_tail=tail)
    except Exception as error:  # a broken config, an unreadable file: report, don't stop the grid
        return AbResult(run, "failed", time.perf_counter() - started, error=f"{stage}: {type(error).__name__}: {error}",
                         log_tail=traceback.format_exc(limit=-3))
    finally:
        os.chdir(previous)


def execute_logged(run: AbRun, working_dir: str) -> AbResult:
    """execute() as a Ray task's body: in the driver's working directory, output to the run's logs."""
    return execute(run, working_dir, logs=True)


def lost_run(run: AbRun, error: str) -> AbResult:
    """The result of a run whose Ray task died."""
    log = run.run_dir / "train.log"
    tail = "\n".join(log.read_text(encoding="utf8", errors="replace").splitlines()[-25:]) if log.exists() else ""
    return AbResult(run, "failed", 0.0, error=f"the Ray task failed: {error}", log_tail=tail)


def run_sequentially(runs: Sequence[AbRun], report: Callable[[str], None] = print) -> List[AbResult]:
    results = []
    for position, run in enumerate(runs, 1):
        report(f"[{position}/{len(runs)}] {run.name}: " + " ".join(run.train_command()))
        try:
            result = execute(run)
        except AbInterrupted as stop:
            stop.run_name = run.name
            raise
        results.append(result)
        report(progress_line(position, len(runs), result))
    return results


def progress_line(done: int, total: int, result: AbResult) -> str:
    prefix = f"[{done}/{total}] {result.run.name}"
    if result.failed:
        return f"{prefix} FAILED after {result.seconds:.0f} s: {result.error}"
    verb = "trained and evaluated" if result.status == "trained" else "kept (finished before)"
    return f"{prefix} {verb} in {result.seconds:.0f} s"


def dry_run_lines(runs: Sequence[AbRun]) -> Iterator[str]:
    """Each run's commands, or that it is kept: after records are restored
    into the output directory, the runs a call would still train."""
    for run in runs:
        if (run.run_dir / RUN_SETTINGS).exists() and not run.train_path.exists():
            yield f"{run.name}: kept if the training sample drawn into {run.train_path} is the recorded one"
            continue
        if finished_settings(run) is not None:
            yield f"{run.name}: kept (finished before with the same settings), nothing to run"
            continue
        yield f"{run.name}:"
        yield "  " + " ".join(run.train_command()) + f"    ({RUN_CONFIG}: {run.config_path} with the run's settings)"
        yield "  " + " ".join(run.evaluate_command())


def is_reported(run: AbRun) -> bool:
    """Whether the run has every record a report reads: finished with the
    plan's settings, scored, and (with --by-mask) its mask strata or the
    model to compute them from."""
    if not (run.run_dir / EVALUATION).exists():
        return False
    if run.train_path.exists():
        if finished_settings(run) is None:
            return False
    else:  # records restored without the training sample drawn into data/: the recorded settings decide
        record_path = run.run_dir / RUN_SETTINGS
        if not record_path.exists() or json.loads(record_path.read_text(encoding="utf8")).get("settings") \
                != run.settings():
            return False
    return not run.by_mask or run.variant == REFERENCE or (run.run_dir / STRATA_FILE).exists() \
        or run.model_dir.exists()


def finished_part(plan: AbPlan, runs: Sequence[AbRun]) -> Tuple[AbPlan, List[AbRun], List[str]]:
    """The comparison of the runs finished so far, for a report while the
    others train: at each size, the seeds every arm has finished (a seed
    with one arm missing has nothing to pair). Returns the plan narrowed to
    those sizes and seeds, their runs, and the runs left out, each named
    with whether it has finished."""
    done = {(run.size, run.variant, run.seed) for run in runs if is_reported(run)}
    complete = {(size, seed) for size in plan.sizes for seed in plan.seeds
                if all((size, variant, seed) in done for variant in plan.arms)}
    kept = [run for run in runs if (run.size, run.seed) in complete]
    left_out = [run.name + (" (finished)" if (run.size, run.variant, run.seed) in done else " (not finished)")
                for run in runs if (run.size, run.seed) not in complete]
    if not kept:
        raise ValueError(Errors.E045.format(
            output_dir=plan.output_dir, arms=", ".join(plan.arms),
            finished=", ".join(run.name for run in runs if (run.size, run.variant, run.seed) in done) or "none"))
    sizes = [size for size in plan.sizes if any(size == done_size for done_size, _ in complete)]
    seeds = [seed for seed in plan.seeds if any(seed == done_seed for _, done_seed in complete)]
    return replace(plan, sizes=sizes, seeds=seeds), kept, left_out
