"""The task families the built-in adapter does not drive yet, and what each would need.

One table, read by the adaptation refusal's remedy (which family a refused architecture would
need: ascendbridge/refusals.py), by bench/coverage.py and by docs/adaptation.md. A family that
joins ascendbridge/task_families.py drops out of `remaining()` on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from ascendbridge.task_families import TASK_FAMILIES


@dataclass(frozen=True)
class MissingFamily:
    family: str
    suffixes: tuple[str, ...]  # architecture class-name endings that identify it
    examples: str
    needs: str  # what a registry entry would need (inputs, accuracy outputs, workload)


MISSING: tuple[MissingFamily, ...] = (
    MissingFamily(
        "multiple_choice",
        ("ForMultipleChoice",),
        "BertForMultipleChoice, RobertaForMultipleChoice",
        "input_ids of shape [batch, choices, seq]; accuracy on the per-choice logits and the chosen index",
    ),
    MissingFamily(
        "masked_image_modeling",
        ("ForMaskedImageModeling",),
        "ViTForMaskedImageModeling, SwinForMaskedImageModeling",
        "pixel_values plus a seeded bool_masked_pos over the patches; reconstruction compared",
    ),
    MissingFamily(
        "video_classification",
        ("ForVideoClassification",),
        "VideoMAEForVideoClassification, TimesformerForVideoClassification",
        "5-D pixel_values (num_frames from the config) built as the video processor does; labels compared",
    ),
    MissingFamily(
        "universal_segmentation",
        ("ForUniversalSegmentation", "ForInstanceSegmentation"),
        "Mask2FormerForUniversalSegmentation, MaskFormerForInstanceSegmentation, OneFormer",
        "class queries and mask logits compared after the processor's post-processing (instance/panoptic masks)",
    ),
    MissingFamily(
        "mask_generation",
        ("SamModel", "Sam2Model"),
        "SamModel (segment anything)",
        "image embeddings plus seeded point / box prompts; predicted masks and IoU scores compared",
    ),
    MissingFamily(
        "keypoint_detection",
        ("ForKeypointDetection",),
        "SuperPointForKeypointDetection",
        "keypoints, scores and descriptors compared with a position tolerance",
    ),
    MissingFamily(
        "image_to_image",
        ("ForImageSuperResolution",),
        "Swin2SRForImageSuperResolution",
        "pixel_values in, reconstruction out; PSNR against the float32 reference as the metric",
    ),
    MissingFamily(
        "text_to_speech",
        ("ForTextToSpeech", "VitsModel", "BarkModel"),
        "SpeechT5ForTextToSpeech, VitsModel, Bark",
        "a vocoder or waveform output, speaker embeddings and a sampling seed; spectrogram / waveform compared",
    ),
    MissingFamily(
        "text_to_audio",
        ("MusicgenForConditionalGeneration", "MusicgenMelodyForConditionalGeneration"),
        "MusicgenForConditionalGeneration",
        "audio-codebook decoder inputs (num_codebooks) and the codec's decoder",
    ),
    MissingFamily(
        "speech_to_speech",
        ("SeamlessM4TModel", "SeamlessM4Tv2Model"),
        "SeamlessM4T",
        "text or speech in, text and unit / waveform out; several heads compared",
    ),
    MissingFamily(
        "audio_xvector",
        ("ForXVector", "ForAudioFrameClassification"),
        "Wav2Vec2ForXVector, Wav2Vec2ForAudioFrameClassification",
        "raw audio input; speaker embeddings (cosine) or per-frame labels compared",
    ),
    MissingFamily(
        "document_question_answering",
        ("LayoutLMv3ForQuestionAnswering", "LayoutLMv2ForQuestionAnswering"),
        "LayoutLMv3ForQuestionAnswering (today classified question_answering by its head, without the inputs it needs)",
        "bounding boxes (bbox) and page pixel_values besides input_ids, built as the processor's OCR output",
    ),
    MissingFamily(
        "graph_classification",
        ("ForGraphClassification",),
        "GraphormerForGraphClassification",
        "graph tensors (node / edge features, spatial positions) built from a seeded graph",
    ),
    MissingFamily(
        "decision_transformer",
        ("DecisionTransformerModel",),
        "DecisionTransformerModel",
        "states, actions, returns-to-go and timesteps of a seeded trajectory",
    ),
)


def remaining() -> list[MissingFamily]:
    """The families still missing (a family that joined the registry drops out)."""
    return [m for m in MISSING if m.family not in TASK_FAMILIES]


def needed_family(architecture: str) -> MissingFamily | None:
    """The missing family an architecture would need, by its class name's ending; None if unknown."""
    return next((m for m in remaining() if architecture and architecture.endswith(m.suffixes)), None)
