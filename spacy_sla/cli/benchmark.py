"""`python -m spacy sla benchmark`: SLA vs plain attention, side by side."""
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import typer
from click.exceptions import NoSuchOption
from spacy.cli._util import Opt, parse_config_overrides
from wasabi import msg

from ..research.benchmark import DEFAULT_DATA, document_ratio_rows, format_table, ratio_rows, run_benchmark
from ..research.config_benchmark import format_config_table, run_config_benchmark
from ..research.converters import ConversionError
from ..research.profiling import format_differences, parse_profile_setting
from ._app import sla_cli

DEFAULT_MODEL = "training/minilm"
OVERRIDES = {"allow_extra_args": True, "ignore_unknown_options": True}


def _positive_numbers(option: str, text: str) -> List[int]:
    """A comma-separated list of whole numbers >= 1, or exit with a one-line
    message now, before anything is loaded or measured."""
    values = [value.strip() for value in text.split(",")]
    if not all(value.isdigit() and int(value) >= 1 for value in values):
        msg.fail(f"{option} takes whole numbers >= 1, comma-separated (e.g. 10,25); got '{text}'", exits=1)
    return [int(value) for value in values]


def _profile_setting(text: str) -> Tuple[int, int]:
    """--profile as (words, batch size), both >= 1, or exit with a one-line message."""
    try:
        words, batch_size = parse_profile_setting(text)
    except ValueError as error:
        msg.fail(f"--profile: {error}", exits=1)
    if words < 1 or batch_size < 1:
        msg.fail(f"--profile takes WORDSxBATCH with both >= 1, e.g. 25x32; got '{text}'", exits=1)
    return words, batch_size


@sla_cli.command("benchmark", context_settings=OVERRIDES)
def benchmark_cli(
    ctx: typer.Context,
    model: Optional[str] = Opt(None, "--model", help=f"Hugging Face model name or local directory (default {DEFAULT_MODEL}; with --config, the config's own unless given)"),
    parser: str = Opt("en_core_web_sm", "--parser", help="The spaCy pipeline whose parser runs first"),
    data: Path = Opt(DEFAULT_DATA, "--data", help="CoNLL-U, .spacy or JSONL ({\"text\": ...} per line): the sentences of the fixed lengths; the documents of a .spacy or JSONL file are also measured as they are"),
    config: Optional[Path] = Opt(None, "--config", help="Your spacy-transformers config (e.g. from `spacy init config --gpu`): measure its vanilla and SLA pipelines on --data instead of the fixed lengths (--lengths, --batch-sizes, --profile and --long-docs do not apply); `--section.key value` overrides it"),
    component: Optional[str] = Opt(None, "--component", help="With --config: the transformer component, if the config has several"),
    n_docs: int = Opt(200, "--n-docs", help="The first N documents of --data: measured as they are, and the sample --config's pipelines are initialised on"),
    documents: bool = Opt(True, "--documents/--no-documents", help="Measure the documents of a .spacy or JSONL --data as they are, besides the fixed lengths"),
    lengths: str = Opt("10,25,40,120,400", "--lengths", help="Words per document, comma-separated ('' for none)"),
    batch_sizes: str = Opt("8,32", "--batch-sizes", help="Documents per batch, comma-separated"),
    repeats: int = Opt(5, "--repeats", help="Timed repetitions (after one warm-up)"),
    n_batches: int = Opt(1, "--n-batches", help="Batches per prediction measurement (with --config: batches of the config's batcher per training measurement)"),
    timing: bool = Opt(True, "--timing/--no-timing", help="Time the variants (--no-timing: peak memory alone)"),
    train: bool = Opt(True, "--train/--no-train", help="Also time training steps"),
    memory: bool = Opt(True, "--memory/--no-memory", help="Also measure peak memory (a process per variant)"),
    gpu_id: int = Opt(-1, "--gpu-id", help="GPU id, or -1 for the CPU"),
    mixed_precision: bool = Opt(False, "--mixed-precision", help="Autocast the transformers (GPU)"),
    profile: str = Opt("", "--profile", help="Also profile one setting per PyTorch operator, as WORDSxBATCH (e.g. 25x32)"),
    long_docs: str = Opt("10000,100000", "--long-docs", help="Also time building the masks of one Doc of each length in tokens, comma-separated ('' to skip)"),
    output: Path = Opt(Path("metrics/benchmark.json"), "--output", help="Where to write the JSON report"),
):
    """Throughput of the transformer component, the whole pipeline and a
    training step for vanilla, SLA and window attention on the same parsed
    Docs, the share of mask building, peak memory, and the SLA / vanilla
    ratios, per input length and batch size, and for the documents of a
    .spacy or JSONL file as they are. With --config: the same for your
    config's vanilla and SLA pipelines, your components and batcher."""
    # Every setting is checked before the minutes of measuring, which a bad
    # value would otherwise end with a traceback.
    if not data.is_file():
        msg.fail(f"No sentences at {data}: pass --data with a CoNLL-U, .spacy or JSONL file (the default is the sample in the project's assets/).", exits=1)
    try:
        overrides: Dict[str, Any] = parse_config_overrides(ctx.args)
    except NoSuchOption as error:  # a mistyped option (--repeat 3), which the overrides let through to here
        msg.fail(f"{error.format_message()} See `python -m spacy sla benchmark --help`.", exits=1)
    if overrides and config is None:
        msg.fail(f"{' '.join('--' + key for key in overrides)}: config overrides apply to --config only", exits=1)
    if component is not None and config is None:
        msg.fail("--component: names the transformer of --config, and applies to --config only", exits=1)
    if config is not None and not config.is_file():
        msg.fail(f"No config at {config}: pass --config with a spaCy config file", exits=1)
    length_list = _positive_numbers("--lengths", lengths) if lengths.strip() else []
    batch_size_list = _positive_numbers("--batch-sizes", batch_sizes)
    long_documents = _positive_numbers("--long-docs", long_docs) if long_docs.strip() else []
    for option, value in (("--repeats", repeats), ("--n-batches", n_batches), ("--n-docs", n_docs)):
        if value < 1:
            msg.fail(f"{option} takes a whole number >= 1; got {value}", exits=1)
    profile_setting = _profile_setting(profile) if profile else None
    if output.exists() and not output.is_file():
        msg.fail(f"--output {output} is a directory; name the JSON file to write", exits=1)
    if config is not None:
        _config_benchmark(config, data, parser, model, overrides, n_docs, repeats, train, memory, gpu_id, n_batches, output,
                          component)
        return
    model = model or DEFAULT_MODEL
    try:
        report = run_benchmark(
            model,
            parser,
            data,
            lengths=length_list,
            batch_sizes=batch_size_list,
            repeats=repeats,
            train=train,
            memory=memory,
            gpu_id=gpu_id,
            n_batches=n_batches,
            mixed_precision=mixed_precision,
            profile=profile_setting,
            timing=timing,
            long_documents=long_documents,
            documents=documents,
            n_docs=n_docs,
        )
    except OSError as error:
        # A parser package or model directory that cannot be loaded ([E050], [E005]).
        msg.fail(f"Could not run the benchmark: {' '.join(str(error).split())}", exits=1)
    except ConversionError as error:
        # A bad line in --data ([E011] FILE:LINE: ...), found before any measuring.
        msg.fail(str(error), exits=1)
    report["ratios"] = ratio_rows(report)
    if "documents" in report:
        report["document_ratios"] = document_ratio_rows(report)
    table = format_table(report)
    report["table"] = table
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2), encoding="utf8")
    print(f"\n{report['date']}, {report['machine']}\nmodel {model}, parser {parser}\n")
    print(table)
    if report["profile"]:
        print(f"Where SLA's extra time goes (~{report['profile']['words']} words, batch {report['profile']['batch_size']}):\n")
        for differences in report["profile"]["differences"]:
            print(format_differences(differences))
    if report["long_document_masks"]:
        print("Mask building for one long Doc (all its spans, tokenization excluded):\n")
        for row in report["long_document_masks"]:
            print(f"  {row['tokens']:>7} tokens, {row['spans']:>5} spans: {row['seconds']:.2f} s ({row['seconds_per_1k_tokens'] * 1000:.1f} ms per 1,000 tokens)")
    msg.good(f"Wrote {output}")


def _config_benchmark(
    config: Path, data: Path, parser: str, model: Optional[str], overrides: Dict[str, Any], n_docs: int, repeats: int,
    train: bool, memory: bool, gpu_id: int, n_batches: int, output: Path, component: Optional[str] = None,
) -> None:
    """--config: the config's vanilla and SLA pipelines, side by side."""
    try:
        report = run_config_benchmark(config, data, parser, model=model, overrides=overrides, n_docs=n_docs,
                                      repeats=repeats, train=train, memory=memory, gpu_id=gpu_id, n_batches=n_batches,
                                      component=component)
    except OSError as error:
        msg.fail(f"Could not run the benchmark: {' '.join(str(error).split())}", exits=1)
    except ValueError as error:
        # [E011] data lines, [E030]-[E035] configs that make no variants, config overrides that do not fit
        msg.fail(f"Could not run the benchmark: {error}", exits=1)
    table = format_config_table(report)
    report["table"] = table
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2), encoding="utf8")
    documents = report["documents"]
    print(f"\n{report['date']}, {report['machine']}\nconfig {config}, model {report['model']}, parser {parser}, "
          f"{documents['n_docs']} documents of {data} ({documents['mean_words']:.0f} words on average, "
          f"{documents['max_words']} at most, {documents['n_spans']} spans)\n")
    print(table)
    msg.good(f"Wrote {output}")
