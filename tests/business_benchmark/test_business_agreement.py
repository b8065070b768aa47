"""Config-only demo models (causal LM, seq2seq, classifier, vision, speech) and a VLM of a family
with no task set yet: the agreement-only path, labelled so, on the bundled (seeded image / audio /
family input) sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from business_benchmark.evidence import AGREEMENT_ONLY
from tests.business_benchmark.business_support import load

EXPECTED = {  # the agreement metrics each family's evaluations must report
    "tiny-gpt2": {
        "ab-text-en": {"perplexity_ratio"},
        "ab-prompts-en": {"exact_match", "token_match_rate", "first_divergence_mean"},
    },
    "tiny-t5": {"ab-seq2seq-en": {"chrf_vs_reference", "bleu_vs_reference", "token_match_rate"}},
    "tiny-bert-classifier": {"ab-sentiment-en": {"label_agreement"}},
    "tiny-vit": {"seeded-images": {"top1_agreement"}},
    "tiny-whisper": {"seeded-audio": {"wer_vs_reference", "token_match_rate", "exact_match"}},
    "tiny-qwen-vl": {"seeded-inputs": {"output_cosine_min", "output_argmax_agreement"}},  # agreement-only family
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_random_weights_get_agreement_metrics_only(tiny_runs: dict[str, tuple[Path, Path]], name: str) -> None:
    evidence = load(tiny_runs[name][1])
    assert evidence["weights"] == "config-initialised" and evidence["scores"] == AGREEMENT_ONLY
    assert evidence["run"]["tokenizer"] == "byte-fallback"  # the demo models ship no tokenizer
    by_set = {ev["set"]: ev for ev in evidence["evaluations"]}
    assert set(by_set) == set(EXPECTED[name])
    for set_name, metrics in EXPECTED[name].items():
        ev = by_set[set_name]
        assert ev["items"] == 4 and ev["metrics"]["task"] == {}  # no task score without real weights
        assert metrics <= set(ev["metrics"]["agreement"])
        assert all(c["kind"] != "relative" for c in ev["checks"])
    # float32 weights cast to bf16 on the same CPU: the predictions agree on this handful of items
    assert evidence["verdict"] == "pass", [c for ev in evidence["evaluations"] for c in ev["checks"] if not c["passed"]]
