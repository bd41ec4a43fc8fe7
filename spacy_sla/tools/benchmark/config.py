"""`spacy sla benchmark --config USER.cfg`: what SLA costs in *your*
pipeline, next to plain attention, in one run.

The user's spacy-transformers config (e.g. from `spacy init config --pipeline
ner --gpu`) becomes a vanilla and an SLA config with make_variant_configs
(identical except in the transformer's blocks, the same parser in both).
Each is initialised as `spacy train` initialises it (init_nlp: the config's
corpora read a sample of the data, so the labels come from the data), and
then, in every repetition, the two take turns at:

- predict: the transformer component alone, on Docs the components before it
  (the parser) annotated beforehand, outside the timing;
- pipeline: the whole pipeline from the texts (tokenizer, parser,
  transformer and the user's components), the parse inside the timing;
- train: a training step as `spacy train` takes it (the config's dropout,
  accumulate_gradient, frozen and annotating components, so the parse of the
  annotating parser is inside the timing; then the optimizer step) on a batch
  of the config's own batcher.

One warm-up, then `repeats` repetitions; medians with the spread, and the
ratios SLA / vanilla of the median times. Peak memory: a fresh process per
variant predicts and takes one training step (as in benchmark.py).
"""
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import spacy
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.schemas import ConfigSchemaTraining
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.training.initialize import init_nlp
from spacy.training.loop import subdivide_batch
from spacy.util import registry, resolve_dot_names
from thinc.api import Config, require_gpu

from ..init_config.configs import make_variant_configs
from ..init_config.user_config import PARSER_VARIABLE, find_transformer
from ..init_config.variant_blocks import REFERENCE
from ..support.user_code import import_user_code
from .measure import (
    MaskTimer,
    _summary,
    _timed,
    document_statistics,
    machine_description,
    peak_memory_in_this_process,
    read_documents,
    setting_ratios,
)

CONFIG_VARIANTS = (REFERENCE, "sla")
SAMPLE = "sample.spacy"


def benchmark_configs(
    config_path: Path,
    parser: Optional[str],
    model: Optional[str] = None,
    overrides: Optional[Dict[str, Any]] = None,
    component: Optional[str] = None,
) -> Dict[str, Config]:
    """The vanilla and SLA configs of a user's config, uninterpolated.
    overrides (`--section.key value`) apply to the user's config, so that
    both variants get them; model replaces the transformer's model name."""
    config = Config().from_disk(config_path, interpolate=False, overrides=dict(overrides or {}))
    if model:
        config["components"][find_transformer(config, component)]["model"]["name"] = model
    return make_variant_configs(config, [name for name in CONFIG_VARIANTS if name != REFERENCE],
                                parser=parser, transformer=component)


def differing_blocks(configs: Dict[str, Config]) -> List[str]:
    """The top-level blocks ([section] or [components.NAME]) in which the
    configs are not all equal: for benchmark_configs, the transformer alone."""
    first, *others = configs.values()
    keys = set()
    for config in configs.values():
        for section, block in config.items():
            if section == "components":
                keys |= {f"components.{name}" for name in block}
            else:
                keys.add(section)

    def value_at(config: Config, key: str) -> Any:
        section, _, name = key.partition(".")
        value = config.get(section, {})
        return value.get(name) if name else value

    return sorted(key for key in keys if any(value_at(other, key) != value_at(first, key) for other in others))


def write_sample(data: Path, lang: str, n_docs: Optional[int], directory: Path) -> Path:
    """The first n_docs documents of data as a .spacy file, with their
    annotations, for the config's corpora to read (a JSONL file's texts
    have none: components that learn labels then learn none)."""
    docs = read_documents(data, spacy.blank(lang), n_docs)
    if not docs:
        raise ValueError(f"No documents in {data}: the config's pipelines need some to be initialised and measured.")
    path = directory / SAMPLE
    DocBin(docs=docs, store_user_data=True).to_disk(path)
    return path


def chosen_batches(batches: Sequence[Any], n_batches: int) -> List[Any]:
    """n_batches of the batcher's batches, evenly spread: the batchers of
    spaCy sort by length (batch_by_padded yields the longest Docs first), so
    one batch is the middle one, not the first."""
    n = min(n_batches, len(batches))
    return [batches[int((i + 0.5) * len(batches) / n)] for i in range(n)]


@dataclass
class ConfigPipeline:
    """One variant, initialised, and what a training step of `spacy train` needs."""

    nlp: Language
    transformer: str
    before_transformer: List[str]  # the components that annotate its input (the parser)
    examples: List[Example]  # the sample, as the config's train corpus reads it; never annotated
    train_batches: List[List[Example]]
    optimizer: Any
    dropout: float
    accumulate_gradient: int
    frozen: List[str]
    annotating: List[str]

    def parsed(self, batch_size: int) -> List[Doc]:
        """The sample's Docs annotated by the components before the transformer."""
        docs = [eg.predicted.copy() for eg in self.examples]
        with self.nlp.select_pipes(enable=self.before_transformer):
            return list(self.nlp.pipe(docs, batch_size=batch_size))

    def predict(self, docs: Sequence[Doc]) -> None:
        pipe = self.nlp.get_pipe(self.transformer)
        if not isinstance(pipe, TrainablePipe):
            raise TypeError(f"The transformer component '{self.transformer}' is not a trainable pipe")
        list(pipe.pipe(docs, batch_size=self.nlp.batch_size))

    def train_step(self, batch: Sequence[Example]) -> None:
        """One step of spaCy's training loop (train_while_improving)."""
        for subbatch in subdivide_batch(batch, self.accumulate_gradient):
            # sgd=False: no optimizer step, as spaCy's training loop passes it (its stub says Optimizer or None)
            self.nlp.update(subbatch, drop=self.dropout, sgd=False,  # type: ignore[arg-type]
                            exclude=self.frozen, annotates=self.annotating)
        for name, proc in self.nlp.pipeline:
            if (name not in self.frozen and isinstance(proc, TrainablePipe) and proc.is_trainable
                    and proc.model not in (True, False, None)):
                proc.finish_update(self.optimizer)
        self.optimizer.step_schedules()


def fresh(batch: Sequence[Example]) -> List[Example]:
    """The batch with unannotated copies of its predicted Docs, so that every
    step starts from what the corpus gave."""
    return [Example(eg.predicted.copy(), eg.reference) for eg in batch]


def build_pipeline(config: Config, sample: Path, gpu_id: int = -1, n_batches: int = 1,
                   component: Optional[str] = None) -> ConfigPipeline:
    """Initialise a variant as `spacy train` does, on the sample."""
    config = Config(config)
    config["paths"]["train"] = str(sample)
    config["paths"]["dev"] = str(sample)
    nlp = init_nlp(config, use_gpu=gpu_id)
    resolved = nlp.config.interpolate()
    training = registry.resolve(resolved["training"], schema=ConfigSchemaTraining)
    (train_corpus,) = resolve_dot_names(resolved, [training["train_corpus"]])
    examples = list(train_corpus(nlp))
    batches = [list(batch) for batch in training["batcher"](examples)]
    if not batches:
        raise ValueError(f"The config's batcher ({resolved['training']['batcher']}) makes no batch of the sample: "
                         "every document is longer than its size; give shorter documents or a larger size.")
    dropout = training["dropout"]
    transformer = find_transformer(nlp.config, component)
    return ConfigPipeline(
        nlp=nlp,
        transformer=transformer,
        before_transformer=nlp.pipe_names[: nlp.pipe_names.index(transformer)],
        examples=examples,
        train_batches=chosen_batches(batches, n_batches),
        optimizer=training["optimizer"],
        # a schedule of dropout rates: its first value, which spaCy's loop takes with next()
        dropout=float(dropout) if isinstance(dropout, (int, float)) else next(dropout),
        accumulate_gradient=training["accumulate_gradient"],
        frozen=list(training["frozen_components"]),
        annotating=list(training["annotating_components"]),
    )


def measure(pipelines: Dict[str, ConfigPipeline], repeats: int, train: bool) -> Dict[str, Any]:
    """Interleaved timings of the variants: a warm-up, then `repeats`
    repetitions in which each variant predicts, runs the whole pipeline and
    takes its training steps in turn."""
    first = next(iter(pipelines.values()))
    docs = first.parsed(first.nlp.batch_size)  # one parse for all variants: the same parser
    texts = [eg.reference.text for eg in first.examples]
    n_words = sum(len(doc) for doc in docs)
    samples: Dict[str, Dict[str, List[float]]] = {v: {"predict": [], "pipeline": [], "train": [], "mask": []}
                                                  for v in pipelines}
    for repeat in range(repeats + 1):  # repetition 0 warms up
        for variant, bench in pipelines.items():
            copies = [doc.copy() for doc in docs]
            model = getattr(bench.nlp.get_pipe(bench.transformer), "model", None)
            timer = MaskTimer(model) if hasattr(model, "syntax_inputs") else None
            if timer:
                timer.__enter__()
            predict = _timed(lambda: bench.predict(copies))
            if timer:
                timer.__exit__()
            whole = _timed(lambda: list(bench.nlp.pipe(texts, batch_size=bench.nlp.batch_size)))
            steps = 0.0
            train_words = 0
            if train:
                for batch in bench.train_batches:
                    examples = fresh(batch)
                    steps += _timed(lambda: bench.train_step(examples))
                    train_words += sum(len(eg.predicted) for eg in examples)
            if repeat == 0:
                continue
            samples[variant]["predict"].append(n_words / predict)
            samples[variant]["pipeline"].append(n_words / whole)
            if train:
                samples[variant]["train"].append(train_words / steps)
            if timer:
                samples[variant]["mask"].append(timer.seconds / predict)
    return {
        "documents": document_statistics(first.nlp, docs, first.transformer),
        "variants": {v: {k: _summary(values) for k, values in s.items() if values} for v, s in samples.items()},
    }


def batch_description(batch: Sequence[Example]) -> Dict[str, int]:
    lengths = [len(eg.predicted) for eg in batch]
    return {"docs": len(lengths), "words": sum(lengths), "padded_words": max(lengths) * len(lengths)}


def config_memory_probe(config_text: str, sample: str, gpu_id: int, n_batches: int, component: Optional[str],
                        code_path: Optional[str] = None) -> float:
    """In a fresh process: initialise one variant, predict the sample with
    the transformer component, take its training steps, report the peak."""
    import_user_code(None if code_path is None else Path(code_path))
    if gpu_id >= 0:
        require_gpu(gpu_id)
    bench = build_pipeline(Config().from_str(config_text, interpolate=False), Path(sample), gpu_id, n_batches, component)
    if gpu_id >= 0:
        import torch

        torch.cuda.reset_peak_memory_stats()
    bench.predict(bench.parsed(bench.nlp.batch_size))
    for batch in bench.train_batches:
        bench.train_step(fresh(batch))
    return peak_memory_in_this_process(gpu_id)


def config_peak_memory(config: Config, sample: Path, gpu_id: int, n_batches: int, component: Optional[str],
                       code_path: Optional[Path] = None) -> float:
    code = ("import json, sys; from spacy_sla.tools.benchmark.config import config_memory_probe; "
            "print(config_memory_probe(*json.load(sys.stdin)))")
    arguments = [config.to_str(interpolate=False), str(sample), gpu_id, n_batches, component,
                 None if code_path is None else str(code_path)]
    result = subprocess.run([sys.executable, "-c", code], input=json.dumps(arguments), capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"The memory probe failed:\n{result.stderr[-3000:]}")
    return float(result.stdout.strip().splitlines()[-1])


def run_config_benchmark(
    config_path: Path,
    data: Path,
    parser_name: Optional[str],
    model: Optional[str] = None,
    overrides: Optional[Dict[str, Any]] = None,
    n_docs: Optional[int] = 200,
    repeats: int = 5,
    train: bool = True,
    memory: bool = True,
    gpu_id: int = -1,
    n_batches: int = 1,
    component: Optional[str] = None,
    code_path: Optional[Path] = None,
) -> Dict[str, Any]:
    """Build, initialise and measure the vanilla and SLA pipelines of a
    user's config on the first n_docs documents of data; code_path: the
    user's registered functions, imported here and in the memory probes."""
    import_user_code(code_path)
    if gpu_id >= 0:
        require_gpu(gpu_id)
    configs = benchmark_configs(config_path, parser_name, model, overrides, component)
    lang = configs[REFERENCE]["nlp"]["lang"]
    with tempfile.TemporaryDirectory() as directory:
        sample = write_sample(data, lang, n_docs, Path(directory))
        print(f"Initialising {' and '.join(configs)} on {len(DocBin().from_disk(sample))} documents of {data} ...", flush=True)
        pipelines = {variant: build_pipeline(config, sample, gpu_id, n_batches, component)
                     for variant, config in configs.items()}
        reference = pipelines[REFERENCE]
        print(f"Measuring {len(reference.examples)} documents, {repeats} repetitions ...", flush=True)
        result = measure(pipelines, repeats, train)
        if memory:
            result["peak_memory_mib"] = {variant: config_peak_memory(config, sample, gpu_id, n_batches, component, code_path)
                                         for variant, config in configs.items()}
    transformer_block = configs[REFERENCE]["components"][reference.transformer]["model"]
    return {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine_description(gpu_id),
        "mode": "config",
        "config": str(config_path),
        "overrides": {key: value for key, value in (overrides or {}).items()},
        "model": transformer_block["name"],
        "parser": parser_description(configs[REFERENCE], reference.before_transformer),
        "data": str(data),
        "repeats": repeats,
        "transformer": reference.transformer,
        "pipelines": {variant: bench.nlp.pipe_names for variant, bench in pipelines.items()},
        "differing_blocks": differing_blocks(configs),
        "batch_size": reference.nlp.batch_size,
        "batcher": dict(configs[REFERENCE]["training"]["batcher"]),
        "train_batches": [batch_description(batch) for batch in reference.train_batches],
        # where the parse of the components before the transformer is inside the timing
        "parse_timed": {"predict": False, "pipeline": True,
                        "train": any(name in reference.annotating for name in reference.before_transformer)},
        **result,
        "ratios": setting_ratios(result, variants=[v for v in CONFIG_VARIANTS if v != REFERENCE]),
    }


def format_config_table(report: Dict[str, Any]) -> str:
    """The config mode's timings and ratios as a Markdown table."""
    variants = report["variants"]
    ratios = report["ratios"]
    documents = report["documents"]
    batches = report["train_batches"]
    pipeline = " + ".join(report["pipelines"][REFERENCE])
    kinds = {
        "predict": f"transformer component ({documents['n_docs']} docs, parsed beforehand, untimed)",
        "pipeline": f"whole pipeline from the texts ({pipeline}; parse timed)",
        "train": (f"training step ({', '.join(str(batch['docs']) for batch in batches)} docs, "
                  f"{', '.join(str(batch['padded_words']) for batch in batches)} padded words; annotating parse timed)"),
    }
    lines = ["Words per second, median (min-max) of the repetitions, and the SLA / vanilla ratio of the median times "
             "(above 1: SLA is slower):", "",
             "| | vanilla words/s | SLA words/s | time SLA / vanilla |", "|---|---|---|---|"]

    def spread(variant: str, kind: str) -> str:
        value = variants.get(variant, {}).get(kind)
        return f"{value['median']:.0f} ({value['min']:.0f}-{value['max']:.0f})" if value else "-"

    for kind, label in kinds.items():
        key = f"sla_{kind}_time_ratio"
        if key in ratios:
            lines.append(f"| {label} | {spread(REFERENCE, kind)} | {spread('sla', kind)} | {ratios[key]:.3f} |")
    if "sla_mask_share" in ratios:
        lines += ["", f"Building the masks: {100 * ratios['sla_mask_share']:.1f}% of the SLA component's time."]
    if "peak_memory_mib" in report:
        memory = report["peak_memory_mib"]
        lines += ["", "| | vanilla | SLA | SLA / vanilla |", "|---|---|---|---|",
                  f"| peak memory, MiB | {memory[REFERENCE]:.0f} | {memory['sla']:.0f} | {ratios['sla_memory_ratio']:.3f} |"]
    return "\n".join(lines) + "\n"


def parser_description(config: Config, before_transformer: Sequence[str]) -> str:
    """The parser that ran before the transformer: the pipeline the variants
    source it from ([paths] parser, as make_variant_configs sets it), or the
    config's own components before the transformer."""
    sourced = config.get("paths", {}).get(PARSER_VARIABLE)
    if sourced:
        return str(sourced)
    return "the config's own " + (", ".join(before_transformer) or "none")
