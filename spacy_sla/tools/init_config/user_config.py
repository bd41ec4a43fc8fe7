"""What init-config reads from a user's config and adds to it: the
spacy-transformers transformer component, whether a parser of the pipeline
can give SLA its parse, and otherwise a trained parser sourced before the
transformer. When a parser or senter of the user's listens to the
transformer (a multi-task pipeline such as en_core_web_trf's), it keeps its
place after the transformer and `sla_parse_withdrawal` takes the sourced
parse off the Docs right after the transformer, so that it parses as on
unparsed Docs; otherwise the parse stays, with an entity guard when a
transition-based entity recognizer follows it."""
import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import spacy
from spacy.util import is_package
from thinc.api import Config

from spacy_sla.parsers import example_parser, install_advice, resolve_parser

from .errors import Errors

PARSER_VARIABLE = "parser"  # [paths] parser: what `--paths.parser` overrides at training time
ADDED_PARSER_NAMES = ("parser", "sla_parser")
TRANSFORMER_FACTORIES = ("transformer", "sla_transformer")
ENTITY_GUARD = "sla_entity_guard"
PARSE_WITHDRAWAL = "sla_parse_withdrawal"
SENTENCE_FACTORIES = ("parser", "beam_parser", "senter")  # they set the parse or sentence starts themselves
TRANSITION_NER_FACTORIES = ("ner", "beam_ner")  # they cannot cross a sentence start of the Doc
TRANSFORMER_ARCHITECTURES = (
    "spacy-transformers.TransformerModel.v1",
    "spacy-transformers.TransformerModel.v2",
    "spacy-transformers.TransformerModel.v3",
    "spacy-sla.SLATransformerModel.v1",
)
PARSER_FACTORIES = ("parser", "beam_parser")
LISTENER_PREFIX = "spacy-transformers.TransformerListener."


@dataclass(frozen=True)
class ParserSource:
    """A trained pipeline whose parser the variants source."""

    pipeline: str  # a package name or a path, as [paths] parser holds it
    component: str  # the parser's name in that pipeline
    lang: str
    listens: bool  # whether the parser listens to a shared tok2vec there (then it is sourced with its own copy)
    score_keys: Tuple[str, ...]  # the scores its scorer reports (default_score_weights), set to null


def inspect_parser(pipeline: str, lang: str = "en") -> ParserSource:
    """Load a pipeline and describe its parser, or raise [SLA-E033] if it is
    not installed or has none; lang: the config's, for the advice. spaCy's
    usual name loads its offline copy where only that is installed
    ([SLA-W013])."""
    pipeline = resolve_parser(pipeline)
    if not (is_package(pipeline) or Path(pipeline).is_dir()):
        raise ValueError(Errors.E033.format(parser=pipeline, reason="it is not an installed package or a directory",
                                            install=install_advice(lang)))
    nlp = spacy.load(pipeline)
    names = [name for name in nlp.pipe_names if nlp.get_pipe_meta(name).factory in PARSER_FACTORIES]
    if not names:
        raise ValueError(Errors.E033.format(parser=pipeline, reason=f"its pipeline {nlp.pipe_names} has no parser",
                                            install=install_advice(lang)))
    name = names[0]
    architectures = [node.get("@architectures", "") for node in _dicts(nlp.config["components"][name].get("model", {}))]
    return ParserSource(
        pipeline=pipeline,
        component=name,
        lang=nlp.lang or lang,
        listens=any(architecture.startswith("spacy.Tok2VecListener.") for architecture in architectures),
        score_keys=tuple(nlp.get_pipe_meta(name).default_score_weights or {}),
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


def is_parser(name: str, block: Dict[str, Any]) -> bool:
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
    own = usable_parsers(config, transformer)
    training = config["training"]
    pipeline = _pipeline(config)
    lang = config["nlp"].get("lang") or "en"
    if own:
        name, added = own[0], None
    else:
        if parser is None:
            raise ValueError(Errors.E033.format(parser="(none given)", reason="the config has no parser",
                                                install=install_advice(lang)))
        if parser.lang != lang:
            raise ValueError(Errors.E034.format(lang=lang, parser=parser.pipeline, parser_lang=parser.lang,
                                                example=example_parser(lang)))
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
    if sets_its_own_parse(config, transformer):
        with_parse_withdrawal(config, transformer)
    else:
        with_entity_guard(config, name)
    return config, added


def usable_parsers(config: Config, transformer: str) -> List[str]:
    """The pipeline's parsers that can parse before the transformer: those
    that do not listen to it."""
    return [name for name, block in config["components"].items()
            if isinstance(block, dict) and is_parser(name, block) and not listens_to(block, transformer)]


def check_listened_to(config: Config, transformer: str) -> None:
    """[SLA-E035] when no component uses the transformer's output."""
    components = config["components"]
    if not any(isinstance(block, dict) and listens_to(block, transformer)
               for name, block in components.items() if name != transformer):
        raise ValueError(Errors.E035.format(transformer=transformer, pipeline=_pipeline(config)))


def sets_its_own_parse(config: Config, transformer: str) -> bool:
    """Whether a component after the transformer sets heads or sentence
    starts itself (a parser or senter that listens to it)."""
    pipeline = _pipeline(config)
    components = config["components"]
    return any(components.get(name, {}).get("factory") in SENTENCE_FACTORIES
               for name in pipeline[pipeline.index(transformer) + 1:])


def with_parse_withdrawal(config: Config, transformer: str) -> None:
    """Put `sla_parse_withdrawal` right after the transformer, annotating,
    so that the components after it see Docs without the sourced parse
    (spacy_sla/parse_withdrawal.py)."""
    components = config["components"]
    pipeline = _pipeline(config)
    own = [name for name in pipeline if components.get(name, {}).get("factory") == PARSE_WITHDRAWAL]
    if own:
        name = own[0]
        pipeline.remove(name)
    else:
        name = next(candidate for candidate in (PARSE_WITHDRAWAL, f"{PARSE_WITHDRAWAL}_1") if candidate not in components)
        components[name] = {"factory": PARSE_WITHDRAWAL}
    pipeline.insert(pipeline.index(transformer) + 1, name)
    config["nlp"]["pipeline"] = pipeline
    training = config["training"]
    training["annotating_components"] = _add_once(training.get("annotating_components", []), name)


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

