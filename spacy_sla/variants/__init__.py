"""The attention variants: one module per mask variant, holding its builder
and registered function, the layer module it makes where it has one
(make_layer_bias), and the init-config blocks of its variants, found
through one registry (registry.py)."""
from . import ancestor_mask, dependency_scale, syntax_mask, threshold_log_bias, tree_distance_bias, window_mask  # noqa: F401  (register the builders and variants)
from .registry import SLA_TRANSFORMER, Variant, get_variant, register_variant, sla_transformer, variant_names

__all__ = ["SLA_TRANSFORMER", "Variant", "get_variant", "register_variant", "sla_transformer", "variant_names"]
