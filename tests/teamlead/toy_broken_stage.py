"""A stage module that crashes on import (tests that this is a failed attempt, not a dead team lead)."""

raise RuntimeError("toy stage module is broken at import time")
