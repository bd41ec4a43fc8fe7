"""Running an annotation: the pipeline loaded once per worker, each shard of
the input (input_file.py) read, annotated and written, in this process or
on Ray; a document the pipeline fails on is a bad line."""
import json
import re
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..support.files import write_atomically
from .errors import Errors
from .input_file import InputItem, plan_shards, read_lines
from .output import (
    encode_shard,
    holding_output_dir,
    prepare_output,
    record_bad_lines,
    record_problem,
    shard_name,
    sort_bad_lines,
)
from .settings import AnnotateSettings, AnnotateSummary, AnnotationError, BadLine, Shard, ShardResult


def load_pipeline(settings: AnnotateSettings, gpu_id: int = -1) -> Any:
    """The pipeline, on the GPU if gpu_id >= 0, with gate storage switched on
    in every sla_transformer when the gates are asked for."""
    import spacy
    from spacy.util import import_file

    if settings.code_path is not None:  # in every worker, before the pipeline's config is resolved
        try:
            import_file("spacy_sla_annotate_code", settings.code_path)
        except Exception as error:  # the user's code: whatever it raises is reported with its file
            reason = f"the --code file {settings.code_path} failed to import ({type(error).__name__}: {error})"
            raise AnnotationError(Errors.E083.format(pipeline=settings.pipeline, reason=reason)) from error
    if gpu_id >= 0:
        spacy.require_gpu(gpu_id)
    try:
        nlp = spacy.load(settings.pipeline)
    except Exception as error:  # files missing or damaged (whatever a reader raises), a factory not registered
        reason = " ".join(str(error).split()) or type(error).__name__
        raise AnnotationError(Errors.E083.format(pipeline=settings.pipeline, reason=reason)) from error
    if "gates" in settings.fields:
        from spacy_sla import SLATransformer

        components = [pipe for _, pipe in nlp.pipeline if isinstance(pipe, SLATransformer)]
        if not components:
            raise AnnotationError(
                f"The field 'gates' needs an sla_transformer component; {settings.pipeline} has "
                f"{', '.join(nlp.pipe_names) or 'no components'}."
            )
        for pipe in components:
            pipe.store_gates = True
    return nlp


class ShardAnnotator:
    """Reads, annotates and writes shards with one loaded pipeline: the unit
    of work of both paths (one per process; one per Ray actor)."""

    def __init__(self, settings: AnnotateSettings, n_shards: int, gpu_id: int = -1):
        self.settings = settings
        self.n_shards = n_shards
        self.nlp = load_pipeline(settings, gpu_id)
        self._input_docs: Optional[List[Any]] = None

    def _spacy_docs(self, shard: Shard) -> List[Any]:
        if self._input_docs is None:  # loaded once per worker, sliced per shard
            from spacy.tokens import DocBin

            self._input_docs = list(DocBin().from_disk(self.settings.input_path).get_docs(self.nlp.vocab))
        return self._input_docs[shard.start:shard.end]

    def __call__(self, shard: Shard) -> ShardResult:
        settings = self.settings
        target = Path(settings.output_dir) / shard_name(settings, shard.index, self.n_shards)
        if target.exists():  # finished by an earlier attempt (a retried Ray task, a resumed run)
            return ShardResult(shard.index, str(target), resumed=True)
        if settings.input_format == "spacy":
            items: List[InputItem] = [(shard.first_line + k, doc, None) for k, doc in enumerate(self._spacy_docs(shard))]
            bad: List[BadLine] = []
        else:
            items, bad = read_lines(settings, shard)
        fit = []
        for number, text, record in items:
            problem = text_problem(text, self.nlp.max_length) or record_problem(settings, record)
            if problem is None:
                fit.append((number, text, record))
            else:
                bad.append(BadLine(settings.input_path, number, problem))
        if bad and settings.on_error == "stop":
            # Returned, not raised: the caller stops the job (a Ray task's
            # exception would reach the driver as text only).
            return ShardResult(shard.index, str(target), bad_lines=_in_order(bad), stopped=True)
        docs, failed = self._annotated(shard, [text for _, text, _ in fit])
        if failed and len(failed) == len(fit) > 1:
            raise AnnotationError(Errors.E138.format(pipeline=settings.pipeline, n_docs=len(fit), path=settings.input_path,
                                                     first=fit[0][0], last=fit[-1][0], reason=failed[0]))
        bad += [BadLine(settings.input_path, fit[position][0], problem) for position, problem in failed.items()]
        if failed and settings.on_error == "stop":
            return ShardResult(shard.index, str(target), bad_lines=_in_order(bad), stopped=True)
        fit = [item for position, item in enumerate(fit) if position not in failed]
        data, unwritable = encode_shard(settings, docs, [record for _, _, record in fit])
        bad += [BadLine(settings.input_path, fit[position][0], problem) for position, problem in unwritable]
        if unwritable and settings.on_error == "stop":
            return ShardResult(shard.index, str(target), bad_lines=_in_order(bad), stopped=True)
        write_atomically(target, data)
        return ShardResult(shard.index, str(target), n_docs=len(docs) - len(unwritable), bad_lines=_in_order(bad))


    def _annotated(self, shard: Shard, inputs: List[Any]) -> Tuple[List[Any], Dict[int, str]]:
        """The annotated Docs of the inputs that the pipeline takes, and why
        it failed on each other one (by position). A document that fails
        fails its whole batch in nlp.pipe, so after a failure each input is
        annotated alone (the Docs of a .spacy input read again, unchanged)."""
        try:
            return list(self.nlp.pipe(inputs, batch_size=self.settings.batch_size)), {}
        except Exception:  # any failure of the pipeline on a document is that document's
            pass
        if self.settings.input_format == "spacy":
            self._input_docs = None  # the failed batch may have annotated some of them part-way
            inputs = self._spacy_docs(shard)
        docs: List[Any] = []
        failed: Dict[int, str] = {}
        for position, item in enumerate(inputs):
            try:
                docs.append(self.nlp(item))
            except Exception as error:  # whatever the pipeline raises on it
                failed[position] = f"the pipeline failed on it ({type(error).__name__}: {' '.join(str(error).split())[:300]})"
        return docs, failed


def text_problem(text: Any, max_length: int) -> Optional[str]:
    """Why the pipeline cannot take a text (spaCy would fail on the whole
    batch), else None; a Doc of a .spacy input has none."""
    if not isinstance(text, str):
        return None
    if len(text) > max_length:
        return (f"a text of {len(text):,} characters, more than the pipeline's max_length of {max_length:,} "
                "(spaCy's [E088]); split it into shorter documents")
    try:
        text.encode("utf8")
    except UnicodeEncodeError as error:
        return (f"the text holds {text[error.start]!r} at column {error.start + 1}, a lone surrogate that UTF-8 "
                "cannot encode (JSON's \\ud800-\\udfff escapes without their pair)")
    return None


def _in_order(bad: List[BadLine]) -> List[BadLine]:
    return sorted(bad, key=lambda line: line.line)


def _summarize(results: Sequence[ShardResult], n_shards: int, started: float) -> AnnotateSummary:
    bad = sorted((line for result in results for line in result.bad_lines), key=lambda line: line.line)
    return AnnotateSummary(n_shards=n_shards, n_docs=sum(result.n_docs for result in results),
                           n_resumed=sum(result.resumed for result in results),
                           bad_lines=bad, seconds=time.time() - started)


def progress_line(done: int, total: int, result: ShardResult) -> str:
    name = Path(result.path).name
    if result.resumed:
        return f"[{done}/{total}] {name}: written before, kept"
    skipped = f", {len(result.bad_lines)} bad line(s) skipped" if result.bad_lines else ""
    return f"[{done}/{total}] {name}: {result.n_docs} docs{skipped}"


def annotate(
    settings: AnnotateSettings,
    *,
    gpu_id: int = -1,
    overwrite: bool = False,
    report: Callable[[str], None] = print,
) -> AnnotateSummary:
    """Annotate in this process, shard by shard, with nlp.pipe."""
    started = time.time()
    settings = settings.resolved()
    settings.check()
    shards = plan_shards(settings)
    with holding_output_dir(settings, report):
        todo = prepare_output(settings, shards, overwrite)
        annotator = ShardAnnotator(settings, len(shards), gpu_id)
        results = []
        for done, shard in enumerate(todo, start=1):
            result = annotator(shard)
            if result.stopped:
                raise result.stop_error()
            record_bad_lines(settings, result.bad_lines)
            results.append(result)
            report(progress_line(done, len(todo), result))
        sort_bad_lines(settings)
    return _summarize(results + _resumed(shards, todo), len(shards), started)


def _resumed(shards: Sequence[Shard], todo: Sequence[Shard]) -> List[ShardResult]:
    waiting = {shard.index for shard in todo}
    return [ShardResult(shard.index, "", resumed=True) for shard in shards if shard.index not in waiting]


# A terminal colour code, as Ray writes them into the text of a worker's error.
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def worker_failure(error: Exception) -> AnnotationError:
    """A Ray worker's failure in one line: the coded message of the
    AnnotationError it raised (a pipeline or --code file that does not
    load), which Ray passes on only as text; else the error's first line."""
    text = _COLOUR.sub("", str(error))
    raised = re.findall(r"AnnotationError: (\[(?:SLA-)?E[0-9]+\].*)", text)
    if raised:
        return AnnotationError(raised[-1].strip())
    first_line = next((line.strip() for line in text.splitlines() if line.strip()), type(error).__name__)
    return AnnotationError(Errors.E084.format(reason=first_line))


class _RayShardAnnotator:
    """The Ray Data actor: one pipeline per worker, one shard per call."""

    def __init__(self, settings: Dict[str, Any], n_shards: int, use_gpu: bool):
        # Ray gives the actor its GPU through CUDA_VISIBLE_DEVICES: device 0.
        self.annotator = ShardAnnotator(AnnotateSettings(**settings), n_shards, 0 if use_gpu else -1)

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, List[Any]]:
        out: Dict[str, List[Any]] = {"index": [], "path": [], "n_docs": [], "resumed": [], "stopped": [],
                                     "bad_lines": []}
        for index, start, end, first_line in zip(batch["index"], batch["start"], batch["end"], batch["first_line"]):
            result = self.annotator(Shard(int(index), int(start), int(end), int(first_line)))
            out["index"].append(result.index)
            out["path"].append(result.path)
            out["n_docs"].append(result.n_docs)
            out["resumed"].append(result.resumed)
            out["stopped"].append(result.stopped)
            # A JSON string keeps the column a plain Arrow type.
            out["bad_lines"].append(json.dumps([asdict(line) for line in result.bad_lines]))
        return out


def annotate_on_ray(
    settings: AnnotateSettings,
    *,
    address: Optional[str] = None,
    workers: Optional[int] = None,
    cpus_per_worker: float = 1.0,
    gpus_per_worker: float = 0.0,
    overwrite: bool = False,
    report: Callable[[str], None] = print,
) -> AnnotateSummary:
    """Annotate with a Ray Data pipeline: the shard plan is read into a
    dataset, an actor pool of `workers` (default: as many as the cluster's
    CPUs or GPUs allow) loads the pipeline once per actor and annotates and
    writes one shard per call; Ray restarts a worker that died and retries
    its shard. The input and output directories must be on storage every
    node sees at the same path."""
    from ..support.ray_session import import_ray, ray_session

    started = time.time()
    settings = settings.resolved()
    settings.check()
    import_ray()  # refused without Ray before the output directory is touched
    shards = plan_shards(settings)
    with holding_output_dir(settings, report):
        todo = prepare_output(settings, shards, overwrite)
        results: List[ShardResult] = []
        if todo:

            with ray_session(address) as ray:
                context = ray.data.DataContext.get_current()
                context.enable_progress_bars = False  # one progress line per shard instead
                if workers is None:
                    resources = ray.cluster_resources()
                    if gpus_per_worker > 0:
                        workers = int(resources.get("GPU", 0) // gpus_per_worker)
                    else:
                        workers = int(resources.get("CPU", 1) // max(cpus_per_worker, 1e-9))
                workers = max(1, min(workers, len(todo)))
                report(f"{len(todo)} shard(s) to write with {workers} Ray worker(s) "
                       f"({cpus_per_worker:g} CPU and {gpus_per_worker:g} GPU each)")
                dataset = ray.data.from_items([asdict(shard) for shard in todo], override_num_blocks=len(todo))
                annotated = dataset.map_batches(
                    _RayShardAnnotator,
                    fn_constructor_kwargs={"settings": asdict(settings), "n_shards": len(shards),
                                           "use_gpu": gpus_per_worker > 0},
                    batch_size=1,
                    compute=ray.data.ActorPoolStrategy(size=workers),
                    num_cpus=cpus_per_worker,
                    num_gpus=gpus_per_worker,
                )
                try:
                    for row in annotated.iter_rows():
                        bad = [BadLine(**line) for line in json.loads(row["bad_lines"])]
                        result = ShardResult(int(row["index"]), str(row["path"]), int(row["n_docs"]),
                                             bool(row["resumed"]), bad, bool(row["stopped"]))
                        if result.stopped:
                            raise result.stop_error()  # shards finished meanwhile stay written
                        record_bad_lines(settings, bad)
                        results.append(result)
                        report(progress_line(len(results), len(todo), result))
                except ray.exceptions.RayError as error:
                    raise worker_failure(error) from error
        sort_bad_lines(settings)
    return _summarize(results + _resumed(shards, todo), len(shards), started)
