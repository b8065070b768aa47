"""Agents on the board: the team lead and its workers announce themselves and heartbeat, so a
silent one can be marked stale and its leases requeued."""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import Any

from sqlmodel import col, delete, select

from ascendbridge.board.base import StoreBase
from ascendbridge.board.connection import BoardError
from ascendbridge.board.records import AgentRecord, HostDeviceRecord, dumps, iso, now_iso, utcnow
from ascendbridge.board.schema import Agent, HostDevice, Task


class AgentStore(StoreBase):
    """Register, heartbeat, stop, list and clean up agents."""

    def register_agent(self, agent_id: str, role: str, pid: int | None = None) -> AgentRecord:
        now = now_iso()
        with self._write() as s:
            row = s.get(Agent, agent_id) or Agent(id=agent_id, role=role, last_heartbeat=now, started_at=now)
            row.role = role
            row.pid = pid if pid is not None else os.getpid()
            row.host = socket.gethostname()
            row.status = "running"
            row.last_heartbeat = now
            row.started_at = now
            s.add(row)
            self._event(s, "agent_started", f"{role} {agent_id} started", data={"pid": row.pid}, origin=agent_id)
            return AgentRecord.of(row)

    def agent_heartbeat(
        self, agent_id: str, current_task_id: int | None = None, status: str = "running"
    ) -> AgentRecord:
        with self._write() as s:
            row = s.get(Agent, agent_id)
            if row is None:
                raise BoardError(f"unknown agent '{agent_id}' (register it first)")
            row.last_heartbeat = now_iso()
            row.current_task_id = current_task_id
            row.status = status
            s.add(row)
            return AgentRecord.of(row)

    def stop_agent(self, agent_id: str) -> None:
        with self._write() as s:
            row = s.get(Agent, agent_id)
            if row is None:
                return
            row.status = "stopped"
            row.current_task_id = None
            row.last_heartbeat = now_iso()
            s.add(row)
            self._event(s, "agent_stopped", f"{row.role} {agent_id} stopped", origin=agent_id)

    def record_host_devices(
        self, host: str, rows: list[dict[str, Any]], source: str, origin: str = "team-lead"
    ) -> list[HostDeviceRecord]:
        """Replace what the board knows of `host`'s devices with what its team lead found now."""
        if not rows:
            raise BoardError(f"no devices to record for host '{host}'")
        now = now_iso()
        with self._write() as s:
            s.exec(delete(HostDevice).where(col(HostDevice.host) == host))
            out = []
            for r in rows:
                row = HostDevice(
                    host=host,
                    kind=str(r["kind"]),
                    index=int(r["index"]),
                    name=str(r.get("name") or ""),
                    memory_gb=r.get("memory_gb"),
                    cpus_json=dumps(list(r.get("cpus") or [])),
                    source=source,
                    seen_at=now,
                )
                s.add(row)
                out.append(HostDeviceRecord.of(row))
            labels = [d.label for d in out]
            self._event(
                s,
                "devices_detected",
                f"{host}: {', '.join(labels)} ({source})",
                data={"host": host, "devices": labels, "source": source},
                origin=origin,
            )
            return out

    def list_host_devices(self) -> list[HostDeviceRecord]:
        with self._read() as s:
            rows = s.exec(
                select(HostDevice).order_by(col(HostDevice.host), col(HostDevice.kind), col(HostDevice.index))
            ).all()
            return [HostDeviceRecord.of(r) for r in rows]

    def list_agents(self) -> list[AgentRecord]:
        with self._read() as s:
            return [AgentRecord.of(r) for r in s.exec(select(Agent).order_by(Agent.started_at)).all()]

    def cleanup_stale_agents(self, stale_after_s: float, origin: str = "cli") -> list[AgentRecord]:
        """Agents silent for longer than the threshold: mark stale, expire their leases, requeue."""
        cutoff = iso(utcnow() - timedelta(seconds=stale_after_s))
        now = now_iso()
        with self._write() as s:
            stale = s.exec(select(Agent).where(Agent.status == "running", col(Agent.last_heartbeat) < cutoff)).all()
            out = []
            for agent in stale:
                agent.status = "stale"
                s.add(agent)
                tasks = s.exec(select(Task).where(Task.status == "in_progress", Task.owner == agent.id)).all()
                for task in tasks:
                    self._back_to_pending(s, task, now, f"owner {agent.id} is stale", {"owner": agent.id}, origin)
                self._event(
                    s,
                    "agent_stale",
                    f"{agent.role} {agent.id} marked stale (last heartbeat {agent.last_heartbeat})",
                    data={"tasks": len(tasks)},
                    origin=origin,
                )
                out.append(AgentRecord.of(agent))
            return out
