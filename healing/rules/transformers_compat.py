"""The model code and the installed transformers disagree: pin transformers to a fitting range."""

from __future__ import annotations

import re

from ascendbridge.package.spec import AdaptationSpec
from healing.failure import Failure
from healing.rules.base import Fix, FixContext, GiveUp, Match, Remedy, Rule

_OLD_API = re.compile(
    r"cannot import name '(\w+)' from 'transformers[\w.]*'|"
    r"module 'transformers[\w.]*' has no attribute '(\w+)'|"
    r"No module named '(transformers\.[\w.]+)'"
)
_UNEXPECTED_KWARG = re.compile(r"(\w[\w.]*)\(\) got an unexpected keyword argument '(\w+)'")
# A TypeError about keywords is transformers' only when raised in its code or by one of its classes.
_TRANSFORMERS_FRAME = re.compile(r"[/\\]transformers[/\\]\S+\.py\"")
_TRANSFORMERS_CLASS = re.compile(r"(?:Model|Config|Tokenizer\w*|Processor|For\w+|PreTrained\w+)(?:\.\w+)?$")
_TOO_OLD = re.compile(
    r"Transformers does not recognize this architecture|your version of Transformers is out of date|"
    r"requires transformers\s*>=\s*[\d.]+"
)
PRE_5_PIN = "transformers>=4.46,<5"


def _major(version: object) -> int | None:
    match = re.match(r"(\d+)\.", str(version or ""))
    return int(match.group(1)) if match else None


class TransformersVersionRule(Rule):
    name = "transformers_version"
    description = "API/version mismatch with transformers (removed names, unknown kwargs, too old): pin transformers."

    def match(self, failure: Failure) -> Match | None:
        text = failure.text
        installed = (failure.result or {}).get("versions", {}).get("transformers") if failure.result else None
        if _TOO_OLD.search(text):
            return Match("transformers is too old for this model", {"direction": "newer", "installed": installed})
        found = _OLD_API.search(text)
        if found:
            what = next(g for g in found.groups() if g)
            return Match(
                f"transformers API mismatch: {found.group(0)}",
                {"direction": "older", "name": what, "installed": installed},
            )
        kwarg = _UNEXPECTED_KWARG.search(text)
        if kwarg and (_TRANSFORMERS_FRAME.search(text) or _TRANSFORMERS_CLASS.search(kwarg.group(1))):
            return Match(
                f"transformers API mismatch: {kwarg.group(0)}",
                {"direction": "older", "name": kwarg.group(2), "installed": installed},
            )
        return None

    def remedy(self, spec: AdaptationSpec, match: Match, ctx: FixContext) -> Remedy:
        current = spec.transformers_requirement
        default = AdaptationSpec.model_fields["transformers_requirement"].default
        if match.facts["direction"] == "newer":
            if "<" in current:
                return Fix(
                    f"drop the upper bound on transformers: {current} -> {default}",
                    {"transformers_requirement": default},
                )
            return GiveUp(
                "the newest transformers allowed is already in use; the architecture may need "
                "remote code or a newer transformers release"
            )
        installed_major = _major(match.facts.get("installed"))
        if "<5" in current.replace(" ", "") or installed_major == 4:
            return GiveUp(f"transformers is already below 5 ({current}); the mismatch is not a 5.x removal")
        return Fix(
            f"pin transformers below 5 ({current} -> {PRE_5_PIN}): '{match.facts['name']}' is gone or changed in 5.x",
            {"transformers_requirement": PRE_5_PIN},
        )
