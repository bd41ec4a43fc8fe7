"""Seeing what SLA does: which components of a pipeline carry syntax-aware
attention and with which settings, how much weight the gates give the local
branch over a corpus (the local mask of a sentence: mask_views.py).

The `spacy sla info|gates` commands are thin wrappers around these
functions, so that notebooks and tests get the same numbers and figures.
matplotlib (the `plots` extra) is imported only by the functions that draw.
"""
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

import numpy
from spacy.language import Language
from spacy.tokens import Doc
from thinc.api import Model

from spacy_sla import SLATransformer
from spacy_sla.gates import GATES_ATTR
from spacy_sla.layers import SLATransformerModel, SyntaxAwareTransformer, check_model_type

SLA_ARCHITECTURE_PREFIX = "spacy-sla.SLA"
PLOTS_HINT = "pip install spacy-sla[plots]"
GATE_AXIS_LABEL = "mean gate g (weight of the local branch)"


class InspectionError(ValueError):
    """A pipeline, an input or the environment does not allow the requested
    inspection; the message says why and what to do."""


@dataclass
class SLALocation:
    """An SLATransformerModel inside a pipeline: the component that holds it,
    where its block sits in the component's config ("model" for an
    sla_transformer component, e.g. "model.tok2vec" after replace_listeners)
    and the block itself."""

    component: str
    config_path: str
    config: Dict[str, Any]
    model: SLATransformerModel


def _sla_config_blocks(config: Dict[str, Any], path: Tuple[str, ...] = ()) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """The config blocks built by a spacy-sla transformer architecture, depth
    first, the same order in which Model.walk() meets their models."""
    if str(config.get("@architectures", "")).startswith(SLA_ARCHITECTURE_PREFIX):
        yield ".".join(path), config
        return
    for key, value in config.items():
        if isinstance(value, dict):
            yield from _sla_config_blocks(value, path + (key,))


def find_sla_models(nlp: Language) -> List[SLALocation]:
    """Every SLATransformerModel of the pipeline: the models of
    sla_transformer components, and the copies that components own after
    `nlp.replace_listeners`."""
    locations = []
    for name, pipe in nlp.pipeline:
        model = getattr(pipe, "model", None)
        if not isinstance(model, Model):
            continue
        nodes = [node for node in model.walk() if isinstance(node, SLATransformerModel)]
        blocks = list(_sla_config_blocks(nlp.config["components"][name]))
        for node, (path, block) in zip(nodes, blocks):
            locations.append(SLALocation(name, path, block, node))
    return locations


def _choose(locations: List[SLALocation], component: Optional[str], what: str) -> SLALocation:
    if component is not None:
        locations = [location for location in locations if location.component == component]
        if not locations:
            raise InspectionError(f"The pipeline has no component '{component}' that carries {what}.")
    if len(locations) > 1:
        names = ", ".join(f"{location.component} ({location.config_path})" for location in locations)
        raise InspectionError(f"The pipeline has several components that carry {what}: {names}. Choose one with --component.")
    return locations[0]


def select_sla_model(nlp: Language, component: Optional[str] = None) -> SLALocation:
    """The pipeline's SLA model (the one in `component` if given); an error if
    it has none, or several and no component was named."""
    locations = find_sla_models(nlp)
    if not locations:
        raise InspectionError(
            f"The pipeline has no syntax-aware transformer (components: {', '.join(nlp.pipe_names) or 'none'}). "
            "Add an sla_transformer component, or use a pipeline trained with a spacy-sla config."
        )
    return _choose(locations, component, "a syntax-aware transformer")


def select_gate_component(nlp: Language, component: Optional[str] = None) -> str:
    """The name of the sla_transformer component whose gates to read: only
    that component stores them in doc._.sla_gates, and only if its model has
    a gated local branch."""
    found = find_sla_models(nlp)
    locations = [location for location in found if isinstance(nlp.get_pipe(location.component), SLATransformer)]
    if not locations:
        nested = [location.component for location in found]
        where = f" (SLA sits inside {', '.join(nested)} after replace_listeners)" if nested else ""
        raise InspectionError(
            f"The pipeline has no sla_transformer component{where}, so there are no SLA gates to read: "
            "gates are stored by the sla_transformer component (store_gates)."
        )
    location = _choose(locations, component, "SLA gates")
    if not _transformer_of(location.model).sla_layers:
        raise InspectionError(
            f"The component '{location.component}' has no SLA layers (its mask is null: an SG-Net or LISA "
            "variant), so it has no gates."
        )
    return location.component


def parses_before(nlp: Language, component: str) -> bool:
    """Whether a component before `component` sets the dependency parse."""
    for name in nlp.pipe_names[: nlp.pipe_names.index(component)]:
        if {"token.dep", "token.head"} & set(nlp.get_pipe_meta(name).assigns):
            return True
    return False


def process_corpus(nlp: Language, docs: Sequence[Doc], component: str, batch_size: int = 32) -> Iterator[Doc]:
    """Run the pipeline up to and including `component` over a corpus. A
    pipeline that parses gets the texts, so that the masks come from its own
    parser; one without a parser (trained on gold trees) gets the stored
    Docs, whose parse it then uses."""
    names = nlp.pipe_names[: nlp.pipe_names.index(component) + 1]
    inputs: Iterable = (doc.text for doc in docs) if parses_before(nlp, component) else docs
    with nlp.select_pipes(enable=names):
        yield from nlp.pipe(inputs, batch_size=batch_size)


def parse(nlp: Language, text: str, component: str) -> Doc:
    """The text through the components before `component`: that gives the
    parse its masks are built from; the transformer itself need not run."""
    with nlp.select_pipes(enable=nlp.pipe_names[: nlp.pipe_names.index(component)]):
        return nlp(text)


@dataclass
class GateStatistics:
    """Per SLA layer: mean and (population) standard deviation of the gate
    over all tokens that have wordpieces, and how many tokens that is."""

    component: str
    layers: List[int]
    mean: List[Optional[float]]
    std: List[Optional[float]]
    n_tokens: List[int]

    def to_dict(self) -> Dict[str, Any]:
        layers = [
            {"layer": layer, "mean": mean, "std": std, "n_tokens": n}
            for layer, mean, std, n in zip(self.layers, self.mean, self.std, self.n_tokens)
        ]
        return {"component": self.component, "layers": layers}


def gate_statistics(docs: Iterable[Doc], layers: Sequence[int], component: str) -> GateStatistics:
    """Accumulate doc._.sla_gates over processed Docs, streaming (sums in
    float64), so a corpus of any size fits in memory. NaN entries (tokens
    without wordpieces) are left out."""
    n_layers = len(layers)
    sums = numpy.zeros(n_layers, dtype=numpy.float64)
    squares = numpy.zeros(n_layers, dtype=numpy.float64)
    counts = numpy.zeros(n_layers, dtype=numpy.int64)
    for doc in docs:
        gates = doc._.get(GATES_ATTR)
        if gates is None:
            if len(doc) == 0:  # a batch of only empty Docs has no gates
                continue
            raise InspectionError(f"No gates were stored for the Doc {doc.text[:50]!r}: enable store_gates.")
        values = gates.astype(numpy.float64)
        present = ~numpy.isnan(values)
        sums += numpy.where(present, values, 0.0).sum(axis=1)
        squares += numpy.where(present, values**2, 0.0).sum(axis=1)
        counts += present.sum(axis=1)
    means: List[Optional[float]] = []
    stds: List[Optional[float]] = []
    for total, square, count in zip(sums, squares, counts):
        if count == 0:
            means.append(None)
            stds.append(None)
        else:
            mean = total / count
            means.append(float(mean))
            stds.append(float(numpy.sqrt(max(square / count - mean**2, 0.0))))
    return GateStatistics(component, list(layers), means, stds, [int(n) for n in counts])


def gate_report(data: Path, n_docs: int, statistics: Dict[str, GateStatistics]) -> Dict[str, Any]:
    """The JSON that `spacy sla gates` writes beside its figure."""
    models = [{"model": label, **stats.to_dict()} for label, stats in statistics.items()]
    return {"data": str(data), "n_docs": n_docs, "models": models}


def require_matplotlib() -> Callable[..., Any]:
    """A maker of matplotlib Figures on the non-interactive Agg canvas (no
    pyplot, so no global backend state is touched); a clear error without
    the `plots` extra."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as error:
        raise InspectionError(f"Drawing figures needs matplotlib: {PLOTS_HINT}") from error

    def new_figure(**kwargs: Any) -> Figure:
        figure = Figure(**kwargs)
        FigureCanvasAgg(figure)
        return figure

    return new_figure


def plot_gate_statistics(statistics: Dict[str, GateStatistics], output: Path) -> None:
    """One figure: the mean gate per SLA layer, one line per model, with the
    standard deviation over tokens as error bars and a shaded band."""
    new_figure = require_matplotlib()
    figure = new_figure(figsize=(6.4, 4.2), dpi=150, layout="constrained")
    axes = figure.add_subplot()
    all_layers: Set[int] = set()
    for label, stats in statistics.items():
        points = [(layer, m, s) for layer, m, s in zip(stats.layers, stats.mean, stats.std) if m is not None]
        if not points:
            continue
        layers, means, stds = (numpy.asarray(column, dtype=float) for column in zip(*points))
        line = axes.errorbar(layers, means, yerr=stds, marker="o", capsize=3, label=label)
        axes.fill_between(layers, means - stds, means + stds, alpha=0.15, color=line.lines[0].get_color())
        all_layers.update(int(layer) for layer in layers)
    axes.set_xlabel("layer")
    axes.set_ylabel(GATE_AXIS_LABEL)
    axes.set_ylim(0.0, 1.0)
    axes.set_xticks(sorted(all_layers))
    axes.axhline(0.5, color="grey", linewidth=0.5, linestyle=":")
    axes.set_title("SLA gates per layer (mean ± std over tokens)")
    axes.legend()
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output)


def _transformer_of(model: SLATransformerModel) -> SyntaxAwareTransformer:
    """The model's encoder, which every loaded or initialised pipeline has."""
    if model.transformer is None:
        raise InspectionError("The SLA transformer has no encoder yet: initialise the pipeline (nlp.initialize) first.")
    return model.transformer


def _parameter_count(parameters: Iterable[Any]) -> int:
    return int(sum(parameter.numel() for parameter in parameters))


def sla_info(nlp: Language) -> List[Dict[str, Any]]:
    """A description of every SLA model in the pipeline: where it is, its
    architecture and settings (the builders' reprs and their config blocks),
    the transformer, and how many parameters SLA adds."""
    result = []
    for location in find_sla_models(nlp):
        model = location.model
        transformer = _transformer_of(model)
        config = transformer.config
        settings = model.settings
        family = check_model_type(config.model_type, name=settings.name or config.name_or_path)
        parent = transformer.parent_attention
        names = set(transformer.sla_parameter_names())
        pipe = nlp.get_pipe(location.component)
        own_component = pipe if isinstance(pipe, SLATransformer) and location.config_path == "model" else None
        result.append(
            {
                "component": location.component,
                "factory": nlp.get_pipe_meta(location.component).factory,
                "config_path": location.config_path,
                "architecture": location.config["@architectures"],
                "transformer": settings.name,
                "model_type": config.model_type,
                "n_layers": len(family.layers(transformer.transformer)),
                "hidden_size": config.hidden_size,
                "n_heads": config.num_attention_heads,
                "sla_layers": list(transformer.sla_layers),
                "mask": None if settings.mask is None else repr(settings.mask),
                "mask_config": location.config.get("mask"),
                "ancestor_mask": None
                if settings.ancestor_mask is None
                else repr(settings.ancestor_mask),
                "syntax_guided_mask_config": location.config.get("ancestor_mask"),
                "parent_attention": None if parent is None else asdict(parent),
                "parent_attention_config": location.config.get("parent_attention"),
                "on_missing_parse": settings.on_missing_parse,
                "store_gates": None if own_component is None else bool(own_component.cfg.get("store_gates")),
                "listeners": [] if own_component is None else list(own_component.listening_components),
                "parameters": _parameter_count(transformer.parameters()),
                "sla_parameters": _parameter_count(p for n, p in transformer.named_parameters() if n in names),
            }
        )
    # The config blocks are thinc Config objects: hand out plain JSON values.
    return json.loads(json.dumps(result))
