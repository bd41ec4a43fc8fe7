"""`spacy sla init-config`: your config as one config per attention variant, the
arms that `spacy sla ab` compares."""
from pathlib import Path
from typing import Optional

from spacy.cli._util import Arg, Opt
from spacy.util import load_config
from wasabi import msg

from spacy_sla.variants import variant_names

from ..init_config.configs import init_variant_configs
from ..init_config.manifest import MANIFEST
from ..init_config.variant_blocks import VARIANT_OPTIONS, parse_sla_layers
from ..support.user_code import check_registered, import_user_code
from ._app import CODE_HELP, comma_separated, sla_cli


def _check_registered(config_path: Path, code_path: Optional[Path]) -> None:
    """Import --code and refuse a config naming unregistered functions; a
    config that does not load is left to init_variant_configs' own error."""
    import_user_code(code_path)
    try:
        config = load_config(config_path, interpolate=False)
    except Exception:
        return
    check_registered(config, config_path, code_path)


@sla_cli.command("init-config")
def init_config_cli(
    input_path: Path = Arg(..., help="Your config, e.g. from `spacy init config --gpu`", exists=True, dir_okay=False),
    output_dir: Path = Arg(..., help=f"Writes OUTPUT_DIR/vanilla.cfg, OUTPUT_DIR/VARIANT.cfg and OUTPUT_DIR/{MANIFEST}, the arms `spacy sla ab` compares; a new or empty folder"),
    variants: str = Opt("sla,window", "--variants", help=f"Comma-separated, of: {', '.join(variant_names())}"),
    parser: Optional[str] = Opt(None, "--parser", help="A pipeline with a parser, sourced when none of the config's can parse before the transformer (default: spaCy's small pipeline for the config's language, e.g. en_core_web_sm, de_core_news_sm)"),
    component: Optional[str] = Opt(None, "--component", help="The transformer component, if the config has several"),
    no_vanilla_parser: bool = Opt(False, "--no-vanilla-parser", help="Leave the added parser out of vanilla.cfg"),
    threshold: Optional[int] = Opt(None, "--threshold", help="m, the hop limit of the syntax masks (default 3)"),
    window: Optional[int] = Opt(None, "--window", help="Tokens on each side of the window mask (default 3)"),
    punct_rule: Optional[str] = Opt(None, "--punct-rule", help="authors, spacy or none"),
    sla_layers: Optional[str] = Opt(None, "--sla-layers", help="Comma-separated layer indices with a local branch"),
    overwrite: bool = Opt(False, "--overwrite", help="Write into a folder that holds files: replace those of the same names and the configs of an earlier init-config call; leave others alone (they are not arms)"),
    code_path: Optional[Path] = Opt(None, "--code", "-c", help=CODE_HELP, exists=True, dir_okay=False),
):
    """Turn a spacy-transformers config into one config per attention
    variant (vanilla first), identical except in the transformer's blocks,
    with a parser before the transformer that gives SLA its parse, and a
    manifest of them. Every option is checked before anything is written."""
    try:
        options = {"threshold": threshold, "window": window, "punct_rule": punct_rule,
                   "sla_layers": None if sla_layers is None else parse_sla_layers(sla_layers)}
        assert set(options) == set(VARIANT_OPTIONS)
        _check_registered(input_path, code_path)
        written = init_variant_configs(input_path, output_dir, comma_separated(variants), parser=parser, transformer=component,
                                       vanilla_parser=not no_vanilla_parser, options=options, overwrite=overwrite)
    except (ValueError, OSError) as error:
        msg.fail(str(error), exits=1)
    for variant, path in written.items():
        msg.good(f"{variant}: {path}")
    msg.good(f"The arms of `spacy sla ab`: {output_dir / MANIFEST}")
    code = "" if code_path is None else f" --code {code_path}"
    msg.info(f"Next: python -m spacy sla ab {output_dir} OUTPUT_DIR --paths.train TRAIN --paths.dev DEV{code}")
