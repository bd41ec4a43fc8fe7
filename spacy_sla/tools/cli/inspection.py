"""`python -m spacy sla gates|mask|info`: see what SLA does in a trained
pipeline; `python -m spacy sla mask-stats`: how much a mask restricts the
attention over a corpus, before training. The logic lives in
spacy_sla.tools.inspection.trained_pipeline and spacy_sla.tools.inspection.mask_statistics; these commands load the
pipelines, print and write files."""
import json
import re
import sys
from itertools import islice
from pathlib import Path
from typing import Any, Dict, List, Optional

import spacy
from spacy import displacy
from spacy.cli._util import Arg, Opt
from spacy.language import Language
from spacy.tokens import DocBin
from tqdm import tqdm
from wasabi import msg

from spacy_sla import SLATransformer, has_complete_parse
from spacy_sla.layers import SLATransformerModel
from spacy_sla.parsers import resolve_parser

from ..inspection.mask_statistics import (
    LEVELS,
    MASKS,
    load_tokenizer,
    make_mask,
    mask_statistics,
    parse_missing,
    sample_docs,
    statistics_table,
    strided_spans,
)
from ..inspection.mask_views import mask_html, plot_masks, token_mask, wordpiece_masks
from ..inspection.trained_pipeline import (
    GateStatistics,
    InspectionError,
    gate_report,
    gate_statistics,
    parse,
    plot_gate_statistics,
    process_corpus,
    require_matplotlib,
    select_gate_component,
    select_sla_model,
    sla_info,
)
from ..support.user_code import import_user_code
from ._app import CODE_HELP, sla_cli

FIGURE_SUFFIXES = (".png", ".pdf", ".svg")
COMPONENT_HELP = "The SLA component to use; needed only when a pipeline has several"


# A coded error of spacy-sla ("[SLA-E006] ...") or spaCy ("[E050] ..."), whose message says what to do.
CODED_ERROR = re.compile(r"\[(SLA-)?E[0-9]+\]")
DAMAGED_HINT = (
    "a file of the saved pipeline is probably truncated or damaged (or its config was edited by hand): "
    "save or copy the pipeline again"
)


def _one_line(error: BaseException) -> str:
    """An error's message on one line (config errors span several)."""
    return " ".join(str(error).split())


def _undecodable_file(model: str) -> Optional[Path]:
    """Which of a pipeline directory's text files is not valid UTF-8 (the
    UnicodeDecodeError that spacy.load raises does not say)."""
    for path in (Path(model) / "config.cfg", Path(model) / "meta.json"):
        try:
            path.read_text(encoding="utf8")
        except UnicodeDecodeError:
            return path
        except OSError:  # not a directory (a package name) or no such file: look no further here
            continue
    return None


def _load(model: str) -> Language:
    """spacy.load, with a one-line message instead of a traceback for what
    goes wrong with a saved pipeline: a wrong name or path (OSError), a text
    file that is not UTF-8, a truncated or damaged file (ValueError from
    msgpack, JSON or numpy; EOFError from numpy), or saved weights that do
    not fit the config ([SLA-E006] and other coded ValueErrors)."""
    try:
        return spacy.load(model)
    except OSError as error:
        msg.fail(f"Could not load the pipeline '{model}': {_one_line(error)}", exits=1)
    except UnicodeDecodeError as error:
        path = _undecodable_file(model)
        where = "a text file of it" if path is None else str(path)
        msg.fail(
            f"Could not load the pipeline '{model}': {where} is not valid UTF-8 "
            f"({error.reason} at byte {error.start}); save it as UTF-8",
            exits=1,
        )
    except Exception as error:  # ValueError from msgpack or JSON, EOFError from numpy, whatever a damaged file makes
        problem = _one_line(error) or type(error).__name__
        if not CODED_ERROR.match(problem):
            problem = f"{problem}; {DAMAGED_HINT}"
        msg.fail(f"Could not load the pipeline '{model}': {problem}", exits=1)


def _read_docs(data_path: Path) -> DocBin:
    """A .spacy file, with a one-line message for one that is not a DocBin
    or is truncated (msgpack's ValueError does not name the file)."""
    try:
        return DocBin().from_disk(data_path)
    except (ValueError, EOFError) as error:
        msg.fail(
            f"Could not read {data_path} as a .spacy file (DocBin): {_one_line(error) or type(error).__name__}; "
            "it is probably truncated or not a .spacy file",
            exits=1,
        )


def _import_code(code_path: Optional[Path]) -> None:
    """--code, before any pipeline loads."""
    try:
        import_user_code(code_path)
    except ValueError as error:
        msg.fail(_one_line(error), exits=1)


def _fail(error: InspectionError, model: str) -> None:
    """Exit with the error's message, which says what to do."""
    msg.fail(f"{model}: {error}", exits=1)


@sla_cli.command("gates")
def gates_cli(
    model: str = Arg(..., help="A pipeline directory or package with an sla_transformer component"),
    data_path: Path = Arg(..., help="A .spacy file (DocBin) with the documents to run", exists=True, dir_okay=False),
    output: Path = Opt(..., "--output", "-o", help="The figure to write (.png, .pdf or .svg); the numbers go beside it as .json"),
    compare: Optional[str] = Opt(None, "--compare", "-c", help="A second pipeline drawn beside MODEL, e.g. one with window attention"),
    component: Optional[str] = Opt(None, "--component", help=COMPONENT_HELP),
    limit: Optional[int] = Opt(None, "--limit", help="Use only the first N documents", min=1),
    batch_size: int = Opt(32, "--batch-size", "-b", help="Documents per nlp.pipe batch", min=1),
    code_path: Optional[Path] = Opt(None, "--code", help=CODE_HELP, exists=True, dir_okay=False),
):
    """How much the gates of each SLA layer weigh the local branch: mean and
    standard deviation of g over all tokens of DATA_PATH, per layer, for MODEL
    (and --compare). A pipeline with a parser parses the texts itself; one
    without (trained on gold trees) uses the parse stored in the Docs.
    Writes one figure to --output and the numbers to the same stem with .json."""
    if output.suffix not in FIGURE_SUFFIXES:
        msg.fail(f"--output must end in {', '.join(FIGURE_SUFFIXES)}; got '{output.name}'", exits=1)
    _import_code(code_path)
    try:
        require_matplotlib()
    except InspectionError as error:
        _fail(error, model)
    doc_bin = _read_docs(data_path)
    n_docs = len(doc_bin) if limit is None else min(limit, len(doc_bin))
    statistics: Dict[str, GateStatistics] = {}
    for label in [model] if compare is None else [model, compare]:
        nlp = _load(label)
        try:
            name = select_gate_component(nlp, component)
            pipe = nlp.get_pipe(name)
            if (not isinstance(pipe, SLATransformer) or not isinstance(pipe.model, SLATransformerModel)
                    or pipe.model.transformer is None):
                raise InspectionError(f"The component '{name}' is not an initialised sla_transformer, which stores gates.")
            pipe.store_gates = True
            docs = list(islice(doc_bin.get_docs(nlp.vocab), n_docs))
            processed = tqdm(
                process_corpus(nlp, docs, name, batch_size),
                total=len(docs),
                desc=label,
                unit="doc",
                disable=not sys.stderr.isatty(),
                leave=False,
            )
            stats = gate_statistics(processed, pipe.model.transformer.sla_layers, name)
        except InspectionError as error:
            _fail(error, label)
        key = label if label not in statistics else f"{label} (--compare)"
        statistics[key] = stats
        for layer, mean, std, n in zip(stats.layers, stats.mean, stats.std, stats.n_tokens):
            shown = "no tokens" if mean is None else f"{mean:.3f} ± {std:.3f} over {n} tokens"
            msg.text(f"{key}: layer {layer}: {shown}")
    plot_gate_statistics(statistics, output)
    json_path = output.with_suffix(".json")
    json_path.write_text(json.dumps(gate_report(data_path, n_docs, statistics), indent=2), encoding="utf8")
    msg.good(f"Wrote {output} and {json_path}")


@sla_cli.command("mask")
def mask_cli(
    model: str = Arg(..., help="A pipeline directory or package with a parser and an SLA transformer"),
    text: str = Arg(..., help="The text to parse and draw"),
    output: Path = Opt(..., "--output", "-o", help=".png: a heatmap, plus the displaCy parse as .svg beside it; .html: one self-contained page with both"),
    wordpieces: bool = Opt(False, "--wordpieces", help="Draw the wordpiece-level matrices the model uses (one per transformer span) instead of the token-level mask"),
    component: Optional[str] = Opt(None, "--component", help=COMPONENT_HELP),
    code_path: Optional[Path] = Opt(None, "--code", "-c", help=CODE_HELP, exists=True, dir_okay=False),
):
    """Draw the local attention mask of one text (rows: query, columns: key)
    beside its dependency parse, from the components that run before the SLA
    transformer. Distance variants (soft tree-distance bias,
    soft threshold) show their distance buckets on a colour scale."""
    if output.suffix not in (".png", ".html"):
        msg.fail(f"--output must end in .png or .html; got '{output.name}'", exits=1)
    _import_code(code_path)
    try:
        if output.suffix == ".png":
            require_matplotlib()
    except InspectionError as error:
        _fail(error, model)
    nlp = _load(model)
    try:
        location = select_sla_model(nlp, component)
        doc = parse(nlp, text, location.component)
        views = wordpiece_masks(doc, location.model) if wordpieces else [token_mask(doc, location.model)]
    except InspectionError as error:
        _fail(error, model)
    svg = displacy.render(doc, style="dep", jupyter=False)
    output.parent.mkdir(parents=True, exist_ok=True)
    if output.suffix == ".html":
        output.write_text(mask_html(text, svg, views), encoding="utf8")
        msg.good(f"Wrote {output}")
    else:
        plot_masks(views, output)
        svg_path = output.with_suffix(".svg")
        svg_path.write_text(svg, encoding="utf8")
        msg.good(f"Wrote {output} and {svg_path}")


def _shown(value: Any) -> str:
    """Lists and config blocks as compact JSON, so a table row stays one line."""
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


@sla_cli.command("info")
def info_cli(
    model: str = Arg(..., help="A pipeline directory or package"),
    as_json: bool = Opt(False, "--json", help="Print JSON instead of tables"),
    code_path: Optional[Path] = Opt(None, "--code", "-c", help=CODE_HELP, exists=True, dir_okay=False),
):
    """Where a pipeline uses syntax-aware attention and how: per component,
    the architecture, mask builder, SG-Net and LISA settings, the SLA layers,
    the transformer, and the parameters SLA adds."""
    _import_code(code_path)
    nlp = _load(model)
    components = sla_info(nlp)
    if not components:
        msg.fail(f"{model}: no component carries syntax-aware attention (components: {', '.join(nlp.pipe_names)})", exits=1)
    if as_json:
        print(json.dumps({"model": model, "components": components}, indent=2))
        return
    for info in components:
        rows = [(key, _shown(value)) for key, value in info.items() if key != "component"]
        msg.table(rows, title=f"{info['component']} ({info['config_path']})", divider=True)


def _numbers(text: str, option: str) -> List[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 0:
        msg.fail(f"{option} must be comma-separated whole numbers >= 0, e.g. 1,2,3,4; got '{text}'", exits=1)
    return values


def _finite(value: Any) -> Any:
    """NaN (a share of nothing) as null, so the JSON stays standard."""
    return None if isinstance(value, float) and value != value else value


@sla_cli.command("mask-stats")
def mask_stats_cli(
    data_path: Path = Arg(..., help="A .spacy file (DocBin): parsed Docs, or Docs for --parser to parse", exists=True, dir_okay=False),
    parser: Optional[str] = Opt(None, "--parser", "-p", help="A pipeline with a parser (e.g. en_core_web_sm) for the Docs without a parse; Docs with one keep it"),
    transformer: Optional[str] = Opt(None, "--transformer", "-t", help="The transformer (local directory or Hugging Face name) whose tokenizer gives the wordpiece counts; without it, token counts only"),
    thresholds: str = Opt("1,2,3,4", "--thresholds", help="Comma-separated thresholds m (sla: hops; window: tokens on each side)"),
    mask: str = Opt("sla", "--mask", help=f"The mask: {', '.join(f'{kind} ({name})' for kind, (name, _) in MASKS.items())}"),
    punct_rule: str = Opt("authors", "--punct-rule", help="The masks' punctuation rule: authors, spacy or none"),
    level: str = Opt("both", "--level", help="sentence (each sentence a sequence), document (each Doc cut into the component's spans) or both"),
    window: int = Opt(128, "--window", help="The span getter's window, in tokens (spacy-transformers.strided_spans.v1)", min=1),
    stride: int = Opt(96, "--stride", help="The span getter's stride, in tokens", min=1),
    limit: Optional[int] = Opt(None, "--limit", help="Use N Docs: the first N, or N drawn at random with --sample-seed", min=1),
    sample_seed: Optional[int] = Opt(None, "--sample-seed", help="Draw the --limit Docs at random with this seed"),
    from_text: bool = Opt(False, "--from-text", help="Parse every Doc again from its text, as spacy train and spacy evaluate make their Docs (needs --parser)"),
    output: Optional[Path] = Opt(None, "--output", "-o", help="Also write the numbers to this JSON file"),
    code_path: Optional[Path] = Opt(None, "--code", "-c", help=CODE_HELP, exists=True, dir_okay=False),
):
    """How much the local mask restricts attention over a corpus, before
    training: per threshold and level, the share of sequences whose mask
    hides nothing and the visible share of token pairs and (with
    --transformer) of wordpiece pairs, as the sla_transformer component
    builds its masks. Prints a markdown table."""
    _import_code(code_path)
    levels = list(LEVELS) if level == "both" else [level]
    values = _numbers(thresholds, "--thresholds")
    try:
        builders = [make_mask(mask, value, punct_rule) for value in values]
        if any(name not in LEVELS for name in levels):
            raise ValueError(f"--level must be one of: {', '.join(LEVELS)}, both; got '{level}'")
    except ValueError as error:
        msg.fail(_one_line(error), exits=1)
    if parser is not None:
        parser = resolve_parser(parser)
    nlp = _load(parser) if parser is not None else spacy.blank("en")
    tokenizer = None
    if transformer is not None:
        try:
            tokenizer = load_tokenizer(transformer)
        except (OSError, ValueError) as error:
            problem = _one_line(error)
            msg.fail(problem if CODED_ERROR.match(problem) else f"Could not load the tokenizer of '{transformer}': {problem}",
                     exits=1)
    all_docs = list(_read_docs(data_path).get_docs(nlp.vocab))
    chosen = sample_docs(all_docs, limit, sample_seed)
    n_parsed = len(chosen) if from_text else sum(not has_complete_parse(doc) for doc in chosen)
    try:
        docs = parse_missing(chosen, nlp if parser is not None else None, from_text=from_text)
    except ValueError as error:
        msg.fail(_one_line(error), exits=1)
    msg.info(f"{len(docs)} of {len(all_docs)} Docs of {data_path}; parsed here: {n_parsed}")
    get_spans = strided_spans(window, stride)
    rows = [
        mask_statistics(docs, builder, level=name, tokenizer=tokenizer, get_spans=get_spans)
        for name in levels
        for builder in builders
    ]
    print(statistics_table(rows))
    if output is not None:
        report = {
            "data": str(data_path),
            "n_docs": len(docs),
            "settings": {
                "parser": parser, "transformer": transformer, "mask": mask, "punct_rule": punct_rule,
                "thresholds": values, "window": window, "stride": stride, "limit": limit,
                "sample_seed": sample_seed, "from_text": from_text,
            },
            "rows": [{key: _finite(value) for key, value in row.as_dict().items()} for row in rows],
        }
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(report, indent=2), encoding="utf8")
        msg.good(f"Wrote {output}")
