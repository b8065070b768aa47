"""Discovery errors carry a one-line message for the user and a rule name for the board.

The rule lets the team lead and dashboards tell a corrupt model (a human must fix the files)
from an unreachable hub (worth retrying later) without parsing messages.
"""

from __future__ import annotations


class DiscoveryError(Exception):
    """A model that cannot be discovered. str(error) is one line, safe to show a user."""

    rule = "discovery_error"

    def __init__(self, message: str, rule: str | None = None) -> None:
        super().__init__(" ".join(message.split()))  # one line, whatever the cause said
        if rule:
            self.rule = rule


class HubUnreachableError(DiscoveryError):
    """The Hugging Face Hub could not be reached (network, endpoint, timeout): retry later."""

    rule = "hub_unreachable"
