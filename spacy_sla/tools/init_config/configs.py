"""`spacy sla init-config`: a user's spacy-transformers config turned into
one config per attention variant, for an A/B comparison of attention and
nothing else.

The variants (the registered ones, spacy_sla.variants: the same blocks the
project's own configs are generated from) differ only in the transformer component's
blocks: its factory, its architecture and the SLA settings. Everything else
is the user's: the transformer's own settings (model name, span getter,
tokenizer, mixed precision, ...), every other component, the corpora, the
training loop and the score weights.

SLA needs a dependency parse in the Doc before the transformer runs. A
parser of the user's pipeline that does not listen to the transformer is
reused (moved before it and made to annotate the training Docs); otherwise a
trained parser is sourced (`--parser`, default spaCy's small pipeline for
the config's language) with its own copy of its token-to-vector layer,
frozen and annotating, and its score weights set to null so that the user's
score stays theirs. The vanilla config gets the same parser, so that both
pipelines pay for the same parse. A parser (or senter) that listens to the
transformer keeps its place, its training and its weights; the sourced parse
is withdrawn from the Docs after the transformer (user_config.py). A config
whose transformer no component listens to is refused with [SLA-E035].

The configs go to a folder of their own with a manifest (sla-configs.json:
the arms, each file's SHA-256, the input and the options). `spacy sla ab`
compares the arms the manifest names and nothing else in the folder, and
checks that each differs from vanilla.cfg only where init-config makes it
differ (arm_differences).

The parts: variant_blocks.py (the variants and their options),
user_config.py (the user's transformer and parser), manifest.py (the
folder's manifest and what an arm may differ in).
"""
import copy
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from thinc.api import Config

from spacy_sla.parsers import installed_default_parser
from spacy_sla.variants import get_variant

from ..support.files import write_atomically
from .errors import Errors
from .manifest import MANIFEST, describe_present, earlier_files, sha256_of, write_manifest
from .user_config import (
    PARSER_VARIABLE,
    check_listened_to,
    find_transformer,
    inspect_parser,
    usable_parsers,
    with_parse,
)
from .variant_blocks import (
    REFERENCE,
    VARIANT_OPTIONS,
    check_model_family,
    check_variant_options,
    takes_option,
    transformer_block,
)

DEFAULT_VARIANTS = ("sla", "window")
HEADER = (
    "# Made by `spacy sla init-config` from {source}: the {variant} variant of {variants}.\n"
    "# The configs differ only in [components.{transformer}*]; the rest is the input's{parser_note}.\n"
)


def make_variant_configs(
    config: Config,
    variants: Sequence[str] = DEFAULT_VARIANTS,
    *,
    parser: Optional[str] = None,
    transformer: Optional[str] = None,
    vanilla_parser: bool = True,
    options: Optional[Dict[str, Any]] = None,
) -> Dict[str, Config]:
    """One config per variant, the reference (vanilla) first: the library
    function behind `spacy sla init-config`. config: the user's config,
    loaded uninterpolated (`Config().from_disk(path, interpolate=False)`).
    parser: the pipeline a parser is sourced from when the config has none
    that can parse before the transformer (default: spaCy's small pipeline
    for the config's language, parsers.py).
    vanilla_parser=False leaves an added parser out of the vanilla config
    (it then no longer pays for the parse). options: variant settings such
    as {"threshold": 4}, set in every variant that has them."""
    options = {key: value for key, value in (options or {}).items() if value is not None}
    chosen = [REFERENCE] + [variant for variant in dict.fromkeys(variants) if variant != REFERENCE]
    for variant in chosen:
        get_variant(variant)  # [SLA-E032] for a variant nobody registered
    for option in options:
        if option not in VARIANT_OPTIONS or not any(takes_option(variant, option) for variant in chosen[1:]):
            raise ValueError(Errors.E038.format(option=option, variants=", ".join(chosen[1:])))
    name = find_transformer(config, transformer)
    pipeline = list(config.get("nlp", {}).get("pipeline", []))
    if name not in pipeline:
        raise ValueError(Errors.E061.format(name=name, pipeline=pipeline))
    check_variant_options(config["components"][name], chosen[1:], options)
    check_listened_to(config, name)
    check_model_family(config["components"][name].get("model") or {})
    lang = config.get("nlp", {}).get("lang") or "en"
    if usable_parsers(config, name):
        source = None
    else:
        source = inspect_parser(parser if parser is not None else installed_default_parser(lang), lang)
    parsed, added = with_parse(config, name, source)
    configs = {}
    for variant in chosen:
        variant_config = copy.deepcopy(config if variant == REFERENCE and added and not vanilla_parser else parsed)
        variant_config["components"][name] = transformer_block(config["components"][name], variant, options)
        configs[variant] = Config(variant_config)
    return configs



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
    earlier = earlier_files(output_dir) if output_dir.is_dir() else {}
    if output_dir.is_dir() and any(output_dir.iterdir()) and not overwrite:
        raise ValueError(Errors.E054.format(output_dir=output_dir, files=describe_present(output_dir, earlier),
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
