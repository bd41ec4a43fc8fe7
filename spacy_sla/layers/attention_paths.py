"""How syntax-aware attention computes what it defines.

Every path computes the same attention (up to floating-point rounding); they
differ in speed and memory. The defaults are the fastest measured
(docs/performance.md); the others are kept for comparison, by the
benchmarks and the tests, which pass their own AttentionPaths to a
SyntaxAwareTransformer (or to AttentionBatch.from_inputs) instead of
changing anything process-wide.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class AttentionPaths:
    """The computation paths of one forward pass.

    fused_attention: SDPA calls where they apply. False: every call through
        the materialised probabilities (one score matrix, a softmax per
        branch), the path that serves output_attentions and score transforms.
    memory_saving_training: training (gradients on) with a mask or bias
        through TwoBranchAttention, which keeps for backward only what the
        two softmaxes need. False: two SDPA calls as in prediction (more
        memory).
    skip_fully_visible: prediction with a boolean mask computes the local
        branch only for the sequences whose mask hides a key
        (AttentionBatch.local_rows). False: for all of them.
    materialise_up_to: prediction on the CPU (float32, no dropout) up to this
        many pieces (the batch's padded width) mixes the two probability
        matrices instead of calling SDPA twice. The CPU's fused kernel is
        slow on short rows; the component was 3-13 % faster this way on
        sentences and texts of up to 111 pieces, and no slower up to 140
        (MiniLM, one and two threads, paired batch by batch). 0: two SDPA
        calls at any length.
    gather_max_share: prediction gathers the sequences that need a local
        branch while they are at most this share of the batch; above it,
        the index copies of the queries, keys, values and outputs cost more
        than the rows they spare, and the batched call runs on every
        sequence (MiniLM on the CPU, benchmarks/local_rows_benchmark.py).
    max_width_groups: prediction on the CPU computes the local branch in at
        most this many groups of sequences of similar length, each cut to
        its longest sequence's pieces (the fused call's cost grows with the
        squared width; strided spans of documents are padded to their
        batch's longest),
    width_groups_min_saving: when that spares at least this share of the
        fused call's work. 1.0: never (no grouping spares all of it); a
        negative share: always.
    """

    fused_attention: bool = True
    memory_saving_training: bool = True
    skip_fully_visible: bool = True
    materialise_up_to: int = 128
    gather_max_share: float = 0.75
    max_width_groups: int = 3
    width_groups_min_saving: float = 0.15


DEFAULT_PATHS = AttentionPaths()
