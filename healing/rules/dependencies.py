"""Python packages: a module the model needs is missing, or the requested pins cannot resolve."""

from __future__ import annotations

import re

from ascendbridge.package.spec import AdaptationSpec
from healing.failure import Failure
from healing.rules.base import Fix, FixContext, GiveUp, Match, Remedy, Rule

# import name (top-level module, or the name transformers prints) -> PyPI distribution
PYPI_NAMES: dict[str, str] = {
    "sentencepiece": "sentencepiece",
    "google": "protobuf",
    "protobuf": "protobuf",
    "tiktoken": "tiktoken",
    "einops": "einops",
    "timm": "timm",
    "scipy": "scipy",
    "librosa": "librosa",
    "soundfile": "soundfile",
    "sklearn": "scikit-learn",
    "scikit-learn": "scikit-learn",
    "cv2": "opencv-python-headless",
    "pil": "pillow",
    "vision": "pillow",  # transformers' "requires the vision library"
    "yaml": "pyyaml",
    "accelerate": "accelerate",
    "tokenizers": "tokenizers",
    "jieba": "jieba",
    "sacremoses": "sacremoses",
    "ftfy": "ftfy",
    "regex": "regex",
    "pytesseract": "pytesseract",
    "torchvision": "torchvision",
    "torchaudio": "torchaudio",
    "levenshtein": "levenshtein",
    "bs4": "beautifulsoup4",
    "attr": "attrs",
    "dateutil": "python-dateutil",
    "skimage": "scikit-image",
}
# Never added as a plain dependency: they come from the device profile or the spec's own pin.
_NOT_ADDABLE = {"torch", "torch_npu", "transformers", "ab_runtime"}

_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
_REQUIRES_LIB = re.compile(r"requires the ([\w\-]+) library but it was not found")
_REQUIRES_PKGS = re.compile(r"requires the following packages that were not found in your environment: ([^.\n]+)")
_RESOLUTION = re.compile(
    r"No solution found when resolving dependencies|there is no version of|"
    r"not found in the package registry|Failed to (?:build|download|prepare distributions)|"
    r"requirements are unsatisfiable|Could not find a version"
)


def pypi_name(import_name: str) -> str:
    top = import_name.split(".")[0].lower()
    if import_name.lower().startswith("google.protobuf"):
        return "protobuf"
    return PYPI_NAMES.get(top, top.replace("_", "-"))


class MissingModuleRule(Rule):
    name = "missing_module"
    description = "A Python module the model code imports is not installed: add it to the spec's dependencies."

    def match(self, failure: Failure) -> Match | None:
        text = failure.text
        # transformers submodules that are gone are a version mismatch (transformers_version rule)
        names = [m.group(1) for m in _NO_MODULE.finditer(text) if not m.group(1).startswith("transformers.")]
        names += [m.group(1) for m in _REQUIRES_LIB.finditer(text)]
        for m in _REQUIRES_PKGS.finditer(text):
            names += [x.strip() for x in m.group(1).split(",") if x.strip()]
        if not names:
            return None
        modules = list(dict.fromkeys(names))
        return Match(f"missing Python module(s): {', '.join(modules)}", {"modules": modules})

    def remedy(self, spec: AdaptationSpec, match: Match, ctx: FixContext) -> Remedy:
        blocked = [m for m in match.facts["modules"] if m.split(".")[0] in _NOT_ADDABLE]
        if blocked:
            return GiveUp(
                f"{', '.join(blocked)} cannot be added as a dependency; it comes from the device "
                "profile or the transformers pin"
            )
        packages = list(dict.fromkeys(pypi_name(m) for m in match.facts["modules"]))
        new = [p for p in packages if p not in spec.dependencies]
        if not new:
            return GiveUp(f"{', '.join(packages)} already declared, yet the import still fails")
        return Fix(f"add dependencies: {', '.join(new)}", {f"dependencies/{p}": "" for p in new})


class DependencyResolutionRule(Rule):
    name = "dependency_resolution"
    description = "uv cannot resolve or install the pins: relax the spec's pins it names."

    def match(self, failure: Failure) -> Match | None:
        if failure.phase not in ("lock", "sync") or not _RESOLUTION.search(failure.text):
            return None
        lines = [x.strip(" ×╰─▶│") for x in failure.output.splitlines() if _RESOLUTION.search(x)]
        return Match(
            f"uv could not resolve the dependencies: {(lines or [failure.error])[0]}",
            {"report": failure.output[-4000:]},
        )

    def remedy(self, spec: AdaptationSpec, match: Match, ctx: FixContext) -> Remedy:
        text = match.facts.get("report", match.summary).lower()
        changes: dict[str, object] = {}
        for name, specifier in spec.dependencies.items():
            if specifier and _mentions(text, name):
                changes[f"dependencies/{name}"] = ""
        default = AdaptationSpec.model_fields["transformers_requirement"].default
        if spec.transformers_requirement != default and _mentions(text, "transformers"):
            changes["transformers_requirement"] = default
        if not changes:
            return GiveUp("the resolution failure names no pin the spec controls")
        return Fix("relax pins: " + ", ".join(k.split("/")[-1] for k in changes), changes)


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w\-]){re.escape(name.lower())}(?![\w\-])", text) is not None
