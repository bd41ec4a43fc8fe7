"""What the cost benchmarks measure with: the documents of a .spacy, JSONL
or CoNLL-U file, wall-clock timings (GPU-synchronised), the time an SLA
component spends building masks, peak memory, the machine, and the cost
ratios of a variant to vanilla. `spacy sla benchmark CONFIG`
(tools/benchmark/config.py) and the performance measurements outside the wheel share them."""
import platform
import resource
import statistics
import time
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
from spacy.language import Language
from spacy.tokens import Doc

from ..annotation import AnnotateSettings, Shard, read_lines
from ..support.conllu import ConversionError, read_conllu
from ..support.errors import Errors

# Relative to the project directory (where `spacy project run performance` runs):
# an installed package ships no data, so other places pass --data.
DEFAULT_DATA = Path("assets") / "ud_ewt_sample" / "en_ewt-ud-dev-sample.conllu"


def jsonl_texts(path: Path, limit: Optional[int] = None) -> List[str]:
    """The "text" field of every line of a JSONL file, read as `spacy sla
    annotate` reads it (blank lines skipped); a bad line raises [SLA-E011]
    FILE:LINE before anything is measured."""
    settings = AnnotateSettings(pipeline="", input_path=str(path), output_dir="")
    items, bad = read_lines(settings, Shard(0, 0, path.stat().st_size, 1))
    if bad:
        raise ConversionError(Errors.E011.format(path=path, line_number=bad[0].line, problem=bad[0].reason))
    return [text for _, text, _ in items][:limit]


def read_documents(path: Path, nlp: Language, limit: Optional[int] = None) -> List[Doc]:
    """The documents of a .spacy file (its Docs with all their annotations),
    a JSONL file (its texts, tokenized by nlp) or a CoNLL-U file (one Doc per
    sentence), in file order, the first `limit` of them."""
    suffix = path.suffix.lower()
    if suffix == ".spacy":
        from spacy.tokens import DocBin

        docs = DocBin().from_disk(path).get_docs(nlp.vocab)
    elif suffix == ".jsonl":
        docs = (nlp.make_doc(text) for text in jsonl_texts(path, limit))
    else:
        docs = read_conllu(path, nlp)
    return list(islice(docs, limit))


def _synchronize() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _timed(function: Callable[[], Any]) -> float:
    _synchronize()
    start = time.perf_counter()
    function()
    _synchronize()
    return time.perf_counter() - start


class MaskTimer:
    """Wraps an SLA model's syntax_inputs to add up the time spent building
    masks (tokenization excluded) during the timed calls."""

    def __init__(self, model):
        self.model = model
        self.seconds = 0.0
        self._original = model.syntax_inputs

    def __enter__(self) -> "MaskTimer":
        def timed(*args, **kwargs):
            start = time.perf_counter()
            result = self._original(*args, **kwargs)
            self.seconds += time.perf_counter() - start
            return result

        self.model.syntax_inputs = timed
        return self

    def __exit__(self, *exc) -> None:
        del self.model.syntax_inputs


def document_statistics(nlp: Language, docs: Sequence[Doc], component: str = "transformer") -> Dict[str, Any]:
    """Lengths of the Docs and the spans the transformer component's own
    span getter cuts them into (spacy-transformers: windows of 128 tokens,
    stride 96), so that a report says how many Docs span several windows."""
    lengths = [len(doc) for doc in docs]
    spans = getattr(nlp.get_pipe(component), "model").attrs["get_spans"](list(docs))
    return {
        "n_docs": len(docs),
        "n_words": sum(lengths),
        "mean_words": statistics.mean(lengths) if lengths else 0.0,
        "max_words": max(lengths, default=0),
        "n_spans": sum(len(doc_spans) for doc_spans in spans),
        "docs_with_several_spans": sum(len(doc_spans) > 1 for doc_spans in spans),
    }


def _summary(values: List[float]) -> Dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def machine_description(gpu_id: int) -> str:
    import os

    cpu = platform.processor() or platform.machine()
    text = f"{platform.system()} {platform.machine()} {cpu}, {os.cpu_count()} CPU cores, torch {torch.__version__} with {torch.get_num_threads()} threads"
    if gpu_id >= 0:
        text += f", GPU {torch.cuda.get_device_name(gpu_id)}"
    return text


def setting_ratios(setting: Dict[str, Any], variants: Sequence[str] = ("sla", "window")) -> Dict[str, float]:
    """A setting's cost ratios to vanilla (time ratios are inverse
    throughput ratios: above 1 means the variant is slower)."""
    timings = setting["variants"]
    row: Dict[str, float] = {}
    for kind in ("predict", "pipeline", "train"):
        if kind in timings.get("vanilla", {}):
            for variant in variants:
                row[f"{variant}_{kind}_time_ratio"] = timings["vanilla"][kind]["median"] / timings[variant][kind]["median"]
    if "sla" in timings:
        row["sla_mask_share"] = timings["sla"]["mask"]["median"]
    if "peak_memory_mib" in setting:
        memory = setting["peak_memory_mib"]
        row["sla_memory_ratio"] = memory["sla"] / memory["vanilla"]
    return row


def peak_memory_in_this_process(gpu_id: int) -> float:
    """MiB: the CUDA high-water mark on a GPU, the peak RSS on the CPU."""
    if gpu_id >= 0:
        return torch.cuda.max_memory_allocated() / 2**20
    status = Path("/proc/self/status")
    if status.exists():
        # VmHWM belongs to this process's own address space; ru_maxrss survives
        # fork + exec, so a probe started by a large benchmark process would
        # report its parent's peak instead of its own.
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # without /proc: the best the OS offers
