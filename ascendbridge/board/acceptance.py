"""Host acceptance on the board: each host's measured and judged figures per stack.

The training preflight's cache: a host and stack is measured once (training/preflight.py). Written
two ways, both here: by the team lead, from the `host_acceptance` event a training attempt's
outcome proposes (`keep_acceptance`, in the attempt's own transaction, ascendbridge/board/leases.py),
and by the command run by hand (`record_host_acceptance`). Read by the stage (through its read-only
board), the command line and the dashboard's hosts page.
"""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from ascendbridge.board.base import StoreBase
from ascendbridge.board.records import HostAcceptanceRecord, dumps, now_iso
from ascendbridge.board.schema import HostAcceptance

ACCEPTANCE_EVENT = "host_acceptance"  # its data is the record: host, stack_id, device, measurement, judged
WARNING_EVENT = "host_acceptance_warning"  # a figure far under its expectation (judge.BELOW)


def put_acceptance(s: Session, data: dict[str, Any]) -> HostAcceptance:
    """Insert or replace the record of `data["host"]` on `data["stack_id"]` (the event's data)."""
    judged = data.get("judged") or {}
    device = (data.get("measurement") or {}).get("device") or {}
    row = s.get(HostAcceptance, (str(data["host"]), str(data["stack_id"]))) or HostAcceptance(
        host=str(data["host"]), stack_id=str(data["stack_id"]), measured_at=now_iso()
    )
    row.device_kind = str(device.get("kind") or "")
    row.device_name = str(device.get("name") or "")
    row.verdict = str(judged.get("verdict") or "")
    row.worst_ratio = judged.get("worst_ratio")
    row.measured_at = str(data.get("measured_at") or now_iso())
    row.data_json = dumps({key: data.get(key) or {} for key in ("measurement", "judged", "baseline")})
    s.add(row)
    return row


def keep_acceptance(s: Session, kind: str, data: dict[str, Any]) -> None:
    """An attempt's event, written by the team lead: a `host_acceptance` one is also the host's record."""
    if kind == ACCEPTANCE_EVENT:
        put_acceptance(s, data)


class AcceptanceStore(StoreBase):
    """Record and read host acceptance records."""

    def record_host_acceptance(self, data: dict[str, Any], message: str, origin: str = "cli") -> HostAcceptanceRecord:
        """A measurement taken by hand: the record, its event, and the warning when it is below."""
        with self._write() as s:
            row = put_acceptance(s, data)
            self._event(s, ACCEPTANCE_EVENT, message, data=data, origin=origin)
            if row.verdict == "below":
                self._event(s, WARNING_EVENT, message, data={"host": row.host, "stack_id": row.stack_id}, origin=origin)
            return HostAcceptanceRecord.of(row)

    def host_acceptance(self, host: str, stack_id: str) -> HostAcceptanceRecord | None:
        with self._read() as s:
            row = s.get(HostAcceptance, (host, stack_id))
            return HostAcceptanceRecord.of(row) if row is not None else None

    def host_acceptances(self, host: str | None = None) -> list[HostAcceptanceRecord]:
        """Every record (or one host's), oldest first: a host's first is its baseline (hostcheck/judge.py)."""
        with self._read() as s:
            query = select(HostAcceptance).order_by(col(HostAcceptance.measured_at))
            if host is not None:
                query = query.where(HostAcceptance.host == host)
            return [HostAcceptanceRecord.of(r) for r in s.exec(query).all()]
