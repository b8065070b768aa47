"""Expected failures with a one-line diagnosis.

These are conditions the runtime recognises (bad spec, missing device, unsupported model, a dry
run that cannot fit memory); demo.py reports them as `error: ...` without a traceback. Anything
else is a real failure of the model code and keeps its traceback for the healer to classify.
"""

from __future__ import annotations


class RuntimeDiagnosis(Exception):
    """Base class: the message is the whole diagnosis, one line."""

    kind = "runtime_error"


class SpecError(RuntimeDiagnosis):
    """adaptation.json is missing, not JSON, or lacks a required field."""

    kind = "spec_error"


class DeviceUnavailable(RuntimeDiagnosis):
    """The requested device cannot be used and no fallback was allowed."""

    kind = "device_unavailable"


class UnsupportedModel(RuntimeDiagnosis):
    """The task family or the model's forward signature is outside what the runtime can drive."""

    kind = "unsupported_model"


class DryRunTooLarge(RuntimeDiagnosis):
    """Even the smallest depth of the model does not fit the memory available for a dry run."""

    kind = "dry_run_too_large"


class DtypeRefused(RuntimeDiagnosis):
    """An operator of the model has no kernel for the run's dtype on this device. `finding`
    names it (module, class, operator, dtype, device), so the stage records a finding and the
    healer can keep that module in float32; the other dtypes' evidence stands."""

    kind = "dtype_refused"

    def __init__(self, finding: dict[str, object]) -> None:
        super().__init__(
            f"{finding.get('operator') or 'an operator'} in {finding.get('module')} "
            f"({finding.get('module_class')}) does not run in {finding.get('dtype')} on "
            f"{finding.get('device')}: {finding.get('error')}"
        )
        self.finding = finding
