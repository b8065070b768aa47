"""Which evaluations a model gets: task family, pipeline tag, language, sentence-transformers.

An evaluation is (set, task): the bundled set to read and the task the runner performs on it.
A model's board metadata may override the choice (`business_sets`: a list of set names, each
with the task its data card names). Hub sets are suggestions for teams with Hub access
(business_benchmark/scripts/download_datasets.py fetches them); the stage itself runs the bundled sets offline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from business_benchmark.datasets import DatasetError, load_card

# task -> the kinds of set it can read
TASK_SET_KINDS: dict[str, tuple[str, ...]] = {
    "perplexity": ("perplexity",),
    "generation": ("generation",),
    "fill_mask": ("perplexity",),
    "retrieval": ("retrieval",),
    "similarity": ("similarity",),
    "classification": ("classification",),
    "token_classification": ("classification",),
    "question_answering": ("question_answering",),
    "seq2seq": ("seq2seq",),
    "image_classification": ("image_classification",),
    "speech_seq2seq": ("speech_seq2seq",),
    "outputs_agreement": ("outputs_agreement",),
}
# Families with no task set yet (issue 13): agreement only, on the family's own seeded inputs.
AGREEMENT_ONLY_FAMILIES = (
    "ctc_speech_recognition",
    "audio_classification",
    "time_series_forecasting",
    "llm_embedding",
    "reranker",
    "image_text_to_text",
    "zero_shot_image_classification",
    "object_detection",
    "semantic_segmentation",
    "depth_estimation",
)
FAMILY_EVALUATIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "causal_lm": (("ab-text-en", "perplexity"), ("ab-prompts-en", "generation")),
    "masked_lm": (("ab-text-en", "fill_mask"),),
    "feature_extraction": (("ab-retrieval-en", "retrieval"), ("ab-sts-en", "similarity")),
    "sequence_classification": (("ab-sentiment-en", "classification"),),
    "token_classification": (("ab-sentiment-en", "token_classification"),),
    "question_answering": (("ab-qa-en", "question_answering"),),
    "seq2seq": (("ab-seq2seq-en", "seq2seq"),),
    "image_classification": (("seeded-images", "image_classification"),),
    "vision_seq2seq": (("seeded-images", "image_classification"),),
    "speech_seq2seq": (("seeded-audio", "speech_seq2seq"),),
    **{family: (("seeded-inputs", "outputs_agreement"),) for family in AGREEMENT_ONLY_FAMILIES},
}
# Hugging Face pipeline tags that name a family more precisely than the architecture does.
PIPELINE_TAG_FAMILIES: dict[str, str] = {
    "text-generation": "causal_lm",
    "fill-mask": "masked_lm",
    "feature-extraction": "feature_extraction",
    "sentence-similarity": "feature_extraction",
    "text-classification": "sequence_classification",
    "token-classification": "token_classification",
    "question-answering": "question_answering",
    "text2text-generation": "seq2seq",
    "translation": "seq2seq",
    "summarization": "seq2seq",
    "image-classification": "image_classification",
    "automatic-speech-recognition": "speech_seq2seq",
    "image-to-text": "vision_seq2seq",
}
# Hub sets per (family, language) for download_datasets.py: (repo id, config, split).
HUB_SETS: dict[tuple[str, str], tuple[tuple[str, str | None, str], ...]] = {
    ("causal_lm", "en"): (("Salesforce/wikitext", "wikitext-2-raw-v1", "test"),),
    ("masked_lm", "en"): (("Salesforce/wikitext", "wikitext-2-raw-v1", "test"),),
    ("feature_extraction", "en"): (("mteb/stsbenchmark-sts", None, "test"), ("mteb/scifact", "corpus", "corpus")),
    ("feature_extraction", "zh"): (("C-MTEB/STSB", None, "test"),),
    ("sequence_classification", "en"): (("stanfordnlp/sst2", None, "validation"),),
    ("token_classification", "en"): (("eriktks/conll2003", None, "validation"),),
    ("question_answering", "en"): (("rajpurkar/squad", None, "validation"),),
    ("seq2seq", "en"): (("EdinburghNLP/xsum", None, "test"),),
    ("image_classification", "en"): (("uoft-cs/cifar10", None, "test"),),
    ("speech_seq2seq", "en"): (("openslr/librispeech_asr", "clean", "test"),),
}


@dataclass(frozen=True)
class Evaluation:
    set: str
    task: str

    def as_dict(self) -> dict[str, str]:
        return {"set": self.set, "task": self.task}


def family_for(task_family: str | None, pipeline_tag: str | None = None) -> str:
    """The family to evaluate: the pipeline tag's when it names one, else the discovered family."""
    family = PIPELINE_TAG_FAMILIES.get(pipeline_tag or "") or task_family
    if family not in FAMILY_EVALUATIONS:
        raise DatasetError(
            f"no business evaluation for task family '{family}' (known: {', '.join(FAMILY_EVALUATIONS)})"
        )
    return family


def task_for_set(name: str, family: str) -> str:
    """The task a board override's set runs as: the family's own task for that kind of set."""
    kind = load_card(name).kind
    for _set_name, task in FAMILY_EVALUATIONS[family]:
        if kind in TASK_SET_KINDS[task]:
            return task
    tasks = [t for t, kinds in TASK_SET_KINDS.items() if kind in kinds]
    if len(tasks) == 1:
        return tasks[0]
    raise DatasetError(f"set '{name}' (kind {kind}) has no task for family {family}")


def evaluations_for(
    task_family: str | None,
    pipeline_tag: str | None = None,
    language: str | None = None,
    sentence_transformers: bool = False,
    override: list[str] | None = None,
) -> list[Evaluation]:
    """The evaluations for one model. A sentence-transformers model is an embedding model whatever
    its head; a board override replaces the family's sets."""
    family = "feature_extraction" if sentence_transformers else family_for(task_family, pipeline_tag)
    if override:
        return [Evaluation(name, task_for_set(name, family)) for name in override]
    return [Evaluation(s, t) for s, t in FAMILY_EVALUATIONS[family]]


def language_note(family: str, language: str | None) -> str | None:
    """A note when the bundled (English) sets do not match the model's language."""
    if not language or language in ("en", "multilingual"):
        return None
    hub = HUB_SETS.get((family, language))
    where = f"; Hub set(s) for it: {', '.join(r for r, _, _ in hub)}" if hub else ""
    return f"bundled sets are English, the model's language is '{language}'{where}"


def evaluations_for_model(model: Any, spec: dict[str, Any]) -> tuple[list[Evaluation], list[str]]:
    """(evaluations, notes) for a board ModelRecord and its adaptation spec (plain dict)."""
    meta = model.metadata or {}
    override = meta.get("business_sets")
    if override is not None and not (isinstance(override, list) and all(isinstance(s, str) for s in override)):
        raise DatasetError("board metadata 'business_sets' must be a list of set names")
    family = spec.get("task_family") or model.task_family
    st = bool(spec.get("sentence_transformers_pooling")) or bool(meta.get("sentence_transformers"))
    language = meta.get("language")
    if isinstance(language, list):
        language = language[0] if language else None
    evaluations = evaluations_for(family, meta.get("pipeline_tag"), language, st, override)
    note = language_note("feature_extraction" if st else family_for(family, meta.get("pipeline_tag")), language)
    return evaluations, [note] if note else []
