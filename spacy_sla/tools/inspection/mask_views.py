"""What the local mask of a sentence looks like: the token-level mask and the
wordpiece matrices a model uses, as heatmaps (matplotlib, the `plots` extra)
or as one self-contained HTML page; `spacy sla mask` draws them."""
import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List

import numpy
from spacy.tokens import Doc

from spacy_sla import BuilderKind, MissingParseError, PunctRule, builder_kind, builder_punct_rule, flatten_spans
from spacy_sla.layers import SLATransformerModel

from .trained_pipeline import InspectionError, require_matplotlib

# Above this many rows the cell values of a distance heatmap are unreadable.
MAX_ANNOTATED_CELLS = 40


@dataclass
class MaskView:
    """One local mask to draw: rows are queries, columns keys. kind: bool
    visibility or tree-distance buckets; legend says what the values mean."""

    title: str
    labels: List[str]
    matrix: numpy.ndarray
    kind: BuilderKind
    legend: str


def _legend(builder: Any, wordpieces: bool) -> str:
    if builder_kind(builder) is not BuilderKind.DISTANCE:
        return "dark: visible to the local branch"
    max_distance = getattr(builder, "max_distance", None)
    if max_distance is None:
        return "tree-distance bucket"
    legend = f"tree-distance bucket: 0-{max_distance} hops, {max_distance + 1} farther or another sentence"
    return legend + (f", {max_distance + 2} special piece" if wordpieces else "")


def _token_label(text: str) -> str:
    return text if text.strip() else repr(text)


def _require_builder(model: SLATransformerModel):
    builder = model.settings.mask
    if builder is None:
        raise InspectionError(
            "The syntax-aware transformer has no local mask builder (mask = null: an SG-Net or LISA "
            "variant), so there is no local mask to draw."
        )
    return builder


def token_mask(doc: Doc, model: SLATransformerModel) -> MaskView:
    """The token-level local mask of the whole Doc, from the model's builder."""
    builder = _require_builder(model)
    try:
        matrix = numpy.asarray(builder(doc))
    except MissingParseError as error:
        raise InspectionError(f"The text has no dependency parse: the pipeline has no parser. {error}") from error
    labels = [_token_label(token.text) for token in doc]
    title = f"{builder!r}, tokens"
    if builder_punct_rule(builder) is PunctRule.AUTHORS:
        # Decided per wordpiece, so a token matrix cannot show it.
        title += " (not shown: punctuation wordpieces, visible from every query; see --wordpieces)"
    return MaskView(title, labels, matrix, builder_kind(builder), _legend(builder, False))


def wordpiece_masks(doc: Doc, model: SLATransformerModel) -> List[MaskView]:
    """The wordpiece-level matrices the model uses, one per transformer
    span, labelled with the wordpieces (special pieces included)."""
    builder = _require_builder(model)
    spans = flatten_spans(model.settings.get_spans([doc]))
    try:
        matrices = model.local_masks([doc])
    except MissingParseError as error:
        raise InspectionError(f"The text has no dependency parse: the pipeline has no parser. {error}") from error
    strings = model.tokenize(spans)[0].strings if spans else []
    kind, legend = builder_kind(builder), _legend(builder, True)
    return [
        MaskView(f"{builder!r}, wordpieces of tokens {span.start} to {span.end - 1}", list(pieces), matrix, kind, legend)
        for span, pieces, matrix in zip(spans, strings, matrices)
    ]


def plot_masks(views: List[MaskView], output: Path) -> None:
    """Heatmaps of the masks, one panel per view, labelled on both axes
    (rows: query, columns: key). Bool masks: dark = visible; distance
    buckets: a colour scale with the values written in small matrices."""
    new_figure = require_matplotlib()
    side = min(max(max(len(view.labels) for view in views) * 0.32 + 2.0, 4.5), 40.0)
    figure = new_figure(figsize=(side + 1.2, side * len(views)), dpi=100, layout="constrained")
    for index, view in enumerate(views):
        axes = figure.add_subplot(len(views), 1, index + 1)
        n = len(view.labels)
        if view.kind is BuilderKind.DISTANCE:
            image = axes.imshow(view.matrix, cmap="viridis", interpolation="nearest")
            figure.colorbar(image, ax=axes, shrink=0.8, label=view.legend)
            if n <= MAX_ANNOTATED_CELLS:
                middle = (int(view.matrix.min()) + int(view.matrix.max())) / 2
                for (row, column), value in numpy.ndenumerate(view.matrix):
                    colour = "white" if value < middle else "black"
                    axes.text(column, row, str(int(value)), ha="center", va="center", fontsize=7, color=colour)
        else:
            axes.imshow(view.matrix.astype(float), cmap="Blues", vmin=0.0, vmax=1.25, interpolation="nearest")
        axes.set_xticks(range(n), view.labels, rotation=90)
        axes.set_yticks(range(n), view.labels)
        # cell borders, so that single cells stay visible in large matrices
        axes.set_xticks(numpy.arange(n + 1) - 0.5, minor=True)
        axes.set_yticks(numpy.arange(n + 1) - 0.5, minor=True)
        axes.grid(which="minor", color="white", linewidth=0.5)
        axes.tick_params(which="minor", length=0)
        axes.set_xlabel("key")
        axes.set_ylabel("query")
        axes.set_title(view.title, fontsize=9)
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output)


def _cell_style(value: Any, kind: BuilderKind, maximum: int) -> str:
    """Distance buckets: dark (near) to light (far) blue; masks: dark where visible."""
    if kind is BuilderKind.DISTANCE:
        lightness = 30 + int(65 * int(value) / max(maximum, 1))
        colour = "#fff" if lightness < 55 else "#000"
        return f"background:hsl(210,60%,{lightness}%);color:{colour}"
    return "background:#333" if value else "background:#fff"


def _mask_table(view: MaskView) -> str:
    maximum = int(view.matrix.max()) if view.matrix.size else 0
    labels = [html.escape(label) for label in view.labels]
    header = "".join(f'<th class="key">{label}</th>' for label in labels)
    rows = []
    for row, query in enumerate(labels):
        cells = []
        for column, key in enumerate(labels):
            value = view.matrix[row, column]
            text = str(int(value)) if view.kind is BuilderKind.DISTANCE else ""
            cells.append(f'<td style="{_cell_style(value, view.kind, maximum)}" title="{query} → {key}">{text}</td>')
        rows.append(f'<tr><th class="query">{query}</th>{"".join(cells)}</tr>')
    return (
        f"<h2>{html.escape(view.title)}</h2><p>rows: query, columns: key; {html.escape(view.legend)}</p>"
        f'<table class="mask"><tr><th></th>{header}</tr>{"".join(rows)}</table>'
    )


def mask_html(text: str, dependency_svg: str, views: List[MaskView]) -> str:
    """One self-contained page: the displaCy parse and the masks as tables
    (no scripts, no external files)."""
    tables = "".join(_mask_table(view) for view in views)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>SLA mask: {html.escape(text[:60])}</title>
<style>
body {{font-family: sans-serif; margin: 2em}}
table.mask {{border-collapse: collapse; font-size: 12px}}
table.mask td {{width: 1.6em; height: 1.6em; border: 1px solid #ccc; text-align: center}}
th.key {{writing-mode: vertical-rl; transform: rotate(180deg); font-weight: normal; padding: 2px}}
th.query {{text-align: right; font-weight: normal; padding-right: 4px}}
</style></head>
<body><h1>Local attention mask</h1><p>{html.escape(text)}</p>
<h2>Dependency parse</h2>{dependency_svg}
{tables}
</body></html>
"""
