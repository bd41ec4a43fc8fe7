"""The plan of `spacy sla ab`: does SLA help *this* pipeline? The reference (vanilla)
and each attention variant of a user's configs (`spacy sla init-config`)
trained with every seed by `spacy train`, each model scored on the dev set
(tools/ab/evaluation.py), and one report (tools/ab/report.py).

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

Safety: one call holds OUTPUT_DIR at a time (lock.py); SIGTERM or SIGINT
stops the training child's process group and leaves its run unrecorded
(stop_on_signals); the arms are those CONFIG_DIR's manifest names, each
differing from vanilla only in attention, and every arm's attention settings
and the data are checked before the first run trains (AbPlan.check); ab
overwrites only the plan and report files it wrote itself (.ab-files.json).
"""
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import srsly
from spacy.util import load_config
from thinc.api import Config

from spacy_sla.errors import TransformerLoadFixes

from ..init_config.manifest import arm_differences, read_manifest
from ..init_config.variant_blocks import REFERENCE, check_attention_model, check_model_family, transformer_layer_count
from ..support.files import file_fingerprint, write_atomically
from ..support.user_code import check_registered
from .budget import config_budget_warnings
from .data import CORPUS_READER, _reader, check_dev_annotation, corpus_documents, draw_training_samples
from .earlier_runs import KEPT, WOULD_REPLACE, check_nothing_replaced, run_status, samples_redrawn
from .errors import OFFLINE_FIX, Errors
from .evaluation import CONFIG_CORPUS, EVAL_CORPORA
from .mask_strata import STRATA_FILE
from .outputs import PLAN, check_outputs, record_outputs, report_names
from .runs import ALL, EVALUATION, RUN_CONFIG, RUN_SETTINGS, AbRun, finished_settings, has_setting, size_label


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
    code_path: Optional[Path] = None  # the user's registered functions (`--code`), imported here and by every run
    eval_corpus: str = CONFIG_CORPUS  # how the dev examples are read for scoring (evaluation.dev_examples)

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
        train_data=False leaves the training data and the loading of the
        transformers out (--report-only reads records)."""
        if self.eval_corpus not in EVAL_CORPORA:
            raise ValueError(Errors.E102.format(value=self.eval_corpus))
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
        for variant, config in zip(self.arms, configs):
            check_registered(config, self.config_path(variant), self.code_path)
        transformer = str(manifest.get("transformer", "transformer"))
        added = list(manifest.get("added_components", []))
        for variant, config in zip(self.arms[1:], configs[1:]):
            differing = arm_differences(configs[0], config, transformer, added)
            if differing:
                shown = ", ".join(differing[:12]) + (f" and {len(differing) - 12} more" if len(differing) > 12 else "")
                raise ValueError(Errors.E058.format(path=self.config_path(variant), variant=variant,
                                                    reference=self.config_path(REFERENCE), keys=shown,
                                                    transformer=transformer, config_dir=self.config_dir))
        loaded: Dict[str, None] = {}  # the transformers loaded, by name and tokenizer settings
        for variant in self.arms:
            self._check_attention(variant, transformer, loaded if train_data else None)
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

    def _check_attention(self, variant: str, transformer: str, loaded: Optional[Dict[str, None]] = None) -> None:
        """The arm's attention as training builds it: the config with the
        run's settings (the overrides of every size), interpolated, its
        transformer's config and tokenizer loaded (unless `loaded` is None;
        those in it are not loaded again), its mask built and its sla_layers
        checked against the model's layers."""
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
            if loaded is not None:
                check_transformer_files(model, transformer, loaded)
            check_model_family(model)
            n_layers = transformer_layer_count(model.get("name")) if model.get("sla_layers") is not None else None
            try:
                check_attention_model(model, n_layers)
            except ValueError as error:
                raise ValueError(Errors.E065.format(variant=variant, path=path, reason=str(error))) from None

    def _check_training_data(self, config: Dict[str, Any]) -> None:
        """[SLA-E062] for training data its reader cannot read or without
        documents; [SLA-E037] for a training size the corpus cannot give."""
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
                  drop_models=self.drop_models, code_path=self.code_path, eval_corpus=self.eval_corpus)
            for size in self.sizes for seed in self.seeds for variant in self.arms
        ]

    def overrides_at(self, size: Optional[int]) -> Dict[str, Any]:
        """The settings of a run at this training size: the size's own over the common ones."""
        return {**self.overrides, **self.size_overrides.get(size, {})}

    def budget_warnings(self) -> List[str]:
        """[SLA-W018] for each training size whose budget does not fit the
        learning-rate schedule (the arms share both: they differ in attention only)."""
        warnings = []
        for size in self.sizes:
            where = f"{self.config_path(REFERENCE)} with this call's overrides" + (
                f" at training size {size_label(size)}" if self.sizes != [None] else "")
            warnings += config_budget_warnings(self.config_path(REFERENCE), self.overrides_at(size), where)
        return warnings

    def samples_redrawn(self) -> bool:
        """Whether drawing the training samples would change those in OUTPUT_DIR/data."""
        return any(size is not None for size in self.sizes) and samples_redrawn(
            self.train_path, self.output_dir / "data", self.sample_seed)

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
            "model": self.model, "eval_corpus": self.eval_corpus, "resamples": self.resamples,
            "random_seed": self.random_seed, "gpu_id": self.gpu_id,
        }


def check_transformer_files(model: Dict[str, Any], component: str, loaded: Dict[str, None]) -> None:
    """[SLA-E005] with the override that fixes it when the model block's
    transformer config or tokenizer cannot be loaded (offline, a hub name
    that is not cached), before any run trains; the weights are left to
    training. `loaded` holds what was loaded before."""
    name = model.get("name")
    if not isinstance(name, str) or "${" in name:
        return
    tokenizer_config = dict(model.get("tokenizer_config") or {})
    key = json.dumps([name, tokenizer_config], sort_keys=True, default=str)
    if key in loaded:
        return
    from spacy_sla.layers.hf_shim import check_config_and_tokenizer

    check_config_and_tokenizer(name, tokenizer_config,
                               TransformerLoadFixes.HUB + " " + OFFLINE_FIX.format(component=component))
    loaded[key] = None


def prepare(plan: AbPlan, replace: bool = False) -> List[AbRun]:
    """Check the plan, refuse to replace finished runs of other settings
    unless told to ([SLA-E145]), draw the training samples and record the plan."""
    plan.check()
    if not replace:
        check_nothing_replaced(plan.output_dir, plan.runs(), plan.samples_redrawn())
    files = draw_training_samples(plan.train_path, plan.sizes, plan.output_dir / "data", plan.sample_seed)
    write_atomically(plan.output_dir / PLAN, json.dumps(plan.to_json(), indent=2).encode("utf8"))
    record_outputs(plan.output_dir, [plan.output_dir / PLAN])
    return plan.runs(files)


def dry_run_lines(runs: Sequence[AbRun], replace: bool = False, redrawn: bool = False) -> Iterator[str]:
    """Each run's status (earlier_runs.run_status: kept, would replace a
    finished run of other settings, to train) and the commands of those
    that train: after records are restored into the output directory, the
    runs a call would still train. redrawn: the training samples will be
    drawn again (AbPlan.samples_redrawn)."""
    refused = 0
    for run in runs:
        if (run.run_dir / RUN_SETTINGS).exists() and not run.train_path.exists():
            yield f"{run.name}: kept if the training sample drawn into {run.train_path} is the recorded one"
            continue
        status = run_status(run, replace, redrawn)
        yield f"{run.name}: {status}"
        if status == KEPT:
            continue
        refused += status.startswith(WOULD_REPLACE)
        yield "  " + " ".join(run.train_command()) + f"    ({RUN_CONFIG}: {run.config_path} with the run's settings)"
        yield "  " + " ".join(run.evaluate_command())
    if refused:
        yield (f"Without --replace this call is refused ([SLA-E145]): {refused} finished run(s) of other settings "
               "would be replaced. Add --replace, or give another OUTPUT_DIR.")


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
