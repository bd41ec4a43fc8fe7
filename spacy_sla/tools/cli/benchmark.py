"""`python -m spacy sla benchmark CONFIG`: what SLA costs in *your*
pipeline: your config's vanilla and SLA pipelines, side by side."""
import json
from pathlib import Path
from typing import Any, Dict, Optional

import typer
from click.exceptions import NoSuchOption
from spacy.cli._util import Arg, Opt, parse_config_overrides
from wasabi import msg

from ..benchmark.config import format_config_table, run_config_benchmark
from ..benchmark.measure import DEFAULT_DATA
from ._app import CODE_HELP, sla_cli

OVERRIDES = {"allow_extra_args": True, "ignore_unknown_options": True}


@sla_cli.command("benchmark", context_settings=OVERRIDES)
def benchmark_cli(
    ctx: typer.Context,
    config: Path = Arg(..., help="Your spacy-transformers config (e.g. from `spacy init config --gpu`); `--section.key value` overrides it"),
    model: Optional[str] = Opt(None, "--model", help="Hugging Face model name or local directory (default: the config's own)"),
    parser: Optional[str] = Opt(None, "--parser", help="The spaCy pipeline whose parser runs first (default: spaCy's small pipeline for the config's language)"),
    data: Path = Opt(DEFAULT_DATA, "--data", help="CoNLL-U, .spacy or JSONL ({\"text\": ...} per line): the documents measured, and the sample the pipelines are initialised on"),
    component: Optional[str] = Opt(None, "--component", help="The transformer component, if the config has several"),
    n_docs: int = Opt(200, "--n-docs", help="The first N documents of --data"),
    repeats: int = Opt(5, "--repeats", help="Timed repetitions (after one warm-up)"),
    n_batches: int = Opt(1, "--n-batches", help="Batches of the config's batcher per training measurement"),
    train: bool = Opt(True, "--train/--no-train", help="Also time training steps"),
    memory: bool = Opt(True, "--memory/--no-memory", help="Also measure peak memory (a process per variant)"),
    gpu_id: int = Opt(-1, "--gpu-id", help="GPU id, or -1 for the CPU"),
    output: Path = Opt(Path("metrics/benchmark.json"), "--output", help="Where to write the JSON report"),
    code_path: Optional[Path] = Opt(None, "--code", "-c", help=CODE_HELP, exists=True, dir_okay=False),
):
    """Throughput of the transformer component, the whole pipeline and a
    training step for your config's vanilla and SLA pipelines (your
    components and batcher) on the documents of --data, peak memory, and
    the SLA / vanilla ratios."""
    # Every setting is checked before the minutes of measuring, which a bad
    # value would otherwise end with a traceback.
    if not data.is_file():
        msg.fail(f"No documents at {data}: pass --data with a CoNLL-U, .spacy or JSONL file (the default is the sample in the project's assets/).", exits=1)
    try:
        overrides: Dict[str, Any] = parse_config_overrides(ctx.args)
    except NoSuchOption as error:  # a mistyped option (--repeat 3), which the overrides let through to here
        msg.fail(f"{error.format_message()} See `python -m spacy sla benchmark --help`.", exits=1)
    if not config.is_file():
        msg.fail(f"No config at {config}: pass a spaCy config file", exits=1)
    for option, value in (("--repeats", repeats), ("--n-batches", n_batches), ("--n-docs", n_docs)):
        if value < 1:
            msg.fail(f"{option} takes a whole number >= 1; got {value}", exits=1)
    if output.exists() and not output.is_file():
        msg.fail(f"--output {output} is a directory; name the JSON file to write", exits=1)
    _config_benchmark(config, data, parser, model, overrides, n_docs, repeats, train, memory, gpu_id, n_batches, output,
                      component, None if code_path is None else code_path.resolve())


def _config_benchmark(
    config: Path, data: Path, parser: Optional[str], model: Optional[str], overrides: Dict[str, Any], n_docs: int, repeats: int,
    train: bool, memory: bool, gpu_id: int, n_batches: int, output: Path, component: Optional[str] = None,
    code_path: Optional[Path] = None,
) -> None:
    """--config: the config's vanilla and SLA pipelines, side by side."""
    try:
        report = run_config_benchmark(config, data, parser, model=model, overrides=overrides, n_docs=n_docs,
                                      repeats=repeats, train=train, memory=memory, gpu_id=gpu_id, n_batches=n_batches,
                                      component=component, code_path=code_path)
    except OSError as error:
        msg.fail(f"Could not run the benchmark: {' '.join(str(error).split())}", exits=1)
    except ValueError as error:
        # [SLA-E011] data lines, [SLA-E030]-[SLA-E035] configs that make no variants, config overrides that do not fit
        msg.fail(f"Could not run the benchmark: {error}", exits=1)
    table = format_config_table(report)
    report["table"] = table
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2), encoding="utf8")
    documents = report["documents"]
    print(f"\n{report['date']}, {report['machine']}\nconfig {config}, model {report['model']}, parser {report['parser']}, "
          f"{documents['n_docs']} documents of {data} ({documents['mean_words']:.0f} words on average, "
          f"{documents['max_words']} at most, {documents['n_spans']} spans)\n")
    print(table)
    msg.good(f"Wrote {output}")
