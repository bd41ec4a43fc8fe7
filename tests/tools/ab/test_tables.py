"""The markdown tables of paired comparisons, over seeds and resampled dev
documents, and of the same split by what the mask hides."""
from spacy_sla.tools.ab.mask_strata import GAP, RESTRICTED, UNRESTRICTED
from spacy_sla.tools.ab.tables import bootstrap_table, strata_table

from .reports import comparison_row

HEADER = ("seeds | per seed Δ (×100) | mean Δ | over seeds: 95% t-interval | verdict "
          "| over documents: 95% bootstrap interval | p | verdict |")


def test_a_comparison_is_a_row_of_differences_times_100():
    rows = [comparison_row("sla", "vanilla", [0.02, 0.04], 0.01, 0.05, 0.012, "better"),
            comparison_row("window", "sla", [-0.01], None, None, None, "not shown")]
    assert bootstrap_table({"rows": rows}).splitlines() == [
        "| comparison | " + HEADER,
        "|---|---|---|---|---|---|---|---|---|",
        "| sla − vanilla | 2 | +2.00, +4.00 | +3.00 | [+1.00, +5.00] | better | [+1.00, +5.00] | 0.012 | better |",
        "| window − sla | 1 | -1.00 | -1.00 | n/a | not shown | n/a | n/a | not shown |",
    ]


def by_mask_row(stratum, documents, differences):
    return {**comparison_row("sla", "vanilla", differences, -0.01, 0.03, 0.5, "not shown"), "stratum": stratum,
            "documents": documents}


def test_the_parts_by_mask_and_their_difference_are_rows():
    rows = [by_mask_row(RESTRICTED, 4, [0.01, 0.03]), by_mask_row(UNRESTRICTED, 8, [0.0, 0.0]),
            by_mask_row(GAP, 12, [0.01, 0.03])]
    assert strata_table(rows).splitlines() == [
        "| comparison | dev documents | " + HEADER,
        "|---|---|---|---|---|---|---|---|---|---|",
        "| sla − vanilla, the mask hides some pairs | 4 | 2 | +1.00, +3.00 | +2.00 | [-1.00, +3.00] | not shown "
        "| [-1.00, +3.00] | 0.500 | not shown |",
        "| sla − vanilla, the mask hides nothing | 8 | 2 | +0.00, +0.00 | +0.00 | [-1.00, +3.00] | not shown "
        "| [-1.00, +3.00] | 0.500 | not shown |",
        "| (sla − vanilla): restricted − unrestricted | 12 | 2 | +1.00, +3.00 | +2.00 | [-1.00, +3.00] | not shown "
        "| [-1.00, +3.00] | 0.500 | not shown |",
    ]


def test_a_part_without_documents_has_no_row_and_its_difference_none():
    rows = [by_mask_row(RESTRICTED, 6, [0.01, 0.03]), by_mask_row(UNRESTRICTED, 0, [0.0, 0.0]),
            by_mask_row(GAP, 6, [0.01, 0.03])]
    lines = strata_table(rows).splitlines()
    assert len(lines) == 5 and lines[2].startswith("| sla − vanilla, the mask hides some pairs | 6 |")
    assert lines[3:] == ["", "- sla: no dev document where the mask hides nothing, so no comparison of the two parts"]
