"""`spacy sla init-config`: a spacy-transformers config turned into one config
per attention variant, identical but for the transformer's blocks, with a
parser before the transformer (configs.py): the user's config read and
checked (user_config.py), the variants' blocks from the core's variant
registry (variant_blocks.py), and the manifest of the arms that `spacy sla
ab` compares (manifest.py)."""
from .configs import init_variant_configs, make_variant_configs
from .manifest import MANIFEST, manifest_variants, read_manifest
from .variant_blocks import REFERENCE

__all__ = ["MANIFEST", "REFERENCE", "init_variant_configs", "make_variant_configs", "manifest_variants",
           "read_manifest"]
