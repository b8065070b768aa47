"""BoardStore is composed of parts (base, leases, steering, agents, registry, reporting): the
scheduler's narrow LeaseBoard interface must match what the parts implement, and no part may
silently shadow another's method through the MRO."""

from __future__ import annotations

import inspect

from ascendbridge.board import BoardStore
from ascendbridge.board.agents import AgentStore
from ascendbridge.board.base import StoreBase
from ascendbridge.board.leases import LeaseBoard, LeaseStore
from ascendbridge.board.registry import RegistryStore
from ascendbridge.board.reporting import ReportingStore
from ascendbridge.board.steering import SteeringStore

PARTS = (StoreBase, LeaseStore, SteeringStore, AgentStore, RegistryStore, ReportingStore)


def _protocol_members() -> list[str]:
    return [n for n, v in vars(LeaseBoard).items() if inspect.isfunction(v) and not n.startswith("_")]


def test_board_store_satisfies_the_lease_interface_with_the_parts_signatures(board: BoardStore) -> None:
    assert isinstance(board, LeaseBoard)
    members = _protocol_members()
    lease_protocol = {
        "claim_task",
        "heartbeat_task",
        "complete_task",
        "fail_task",
        "release_task",
        "reclaim_expired",
        "while_owned",
        "interruptions",
    }
    assert lease_protocol <= set(members)
    assert all(name in vars(LeaseStore) for name in lease_protocol)
    # Nothing of steering, registration or export: the scheduler cannot reach them.
    assert not {"retry", "skip", "set_priority", "register_models", "export", "list_metrics"} & set(members)
    for name in members:
        part = next((p for p in PARTS if name in vars(p)), None)
        assert part is not None, f"{name} is not implemented by any part of BoardStore"
        declared = list(inspect.signature(getattr(LeaseBoard, name)).parameters.items())
        implemented = list(inspect.signature(getattr(part, name)).parameters.items())
        assert [(n, p.kind, p.default) for n, p in declared] == [(n, p.kind, p.default) for n, p in implemented], name


def test_each_method_lives_in_exactly_one_part() -> None:
    seen: dict[str, str] = {}
    for part in PARTS:
        for name, value in vars(part).items():
            if callable(value) or isinstance(value, (staticmethod, classmethod)):
                assert name not in seen, f"{name} is defined in both {seen[name]} and {part.__name__}"
                seen[name] = part.__name__
    assert vars(BoardStore).keys() <= {
        "__module__",
        "__doc__",
        "__qualname__",
        "__firstlineno__",
        "__static_attributes__",
    }
