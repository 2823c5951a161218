"""What a run must satisfy, checked from the recorded history and the final state.

* **appends**: every acknowledged value is in the final list, at the position its
  acknowledgement gave (nothing lost, nothing reordered); no value twice (no duplicates); no
  value nobody appended; values of unknown outcome may or may not be there.
* **registers**: each key's history linearizable (``linearizable``).
* **replicas**: every server has applied the same entries to the same state (a digest of each
  one's own state machine at the same applied index).
* **leaders**: never two leaders for one term (from every ``/raftz`` the harness read).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .linearizable import Verdict, check_registers
from .workload import History


@dataclass
class AppendCheck:
    acked: int
    unknown: int
    failed: int
    final_length: int
    lost: list[str] = field(default_factory=list)  # acknowledged, missing
    moved: list[tuple[str, int, int]] = field(default_factory=list)  # (value, acked at, found at)
    duplicated: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)  # never appended by anyone
    unknown_applied: int = 0  # unknown outcome, found in the list

    @property
    def ok(self) -> bool:
        return not (self.lost or self.moved or self.duplicated or self.unexpected)


def check_appends(history: History, final: list[Any]) -> AppendCheck:
    acked = {a.value: a for a in history.appends if a.outcome == "ok"}
    attempted = {a.value for a in history.appends}
    unknown = {a.value for a in history.appends if a.outcome == "info"}
    res = AppendCheck(
        acked=len(acked),
        unknown=len(unknown),
        failed=sum(1 for a in history.appends if a.outcome == "fail"),
        final_length=len(final),
    )
    where: dict[str, int] = {}
    for i, v in enumerate(final, start=1):
        if v is None:  # nothing there, or something no client appended by id (a probe)
            continue
        if v in where:
            res.duplicated.append(str(v))
        else:
            where[str(v)] = i
        if v not in attempted:
            res.unexpected.append(str(v))
    for v, a in sorted(acked.items(), key=lambda kv: kv[1].invoke):
        pos = where.get(v)
        if pos is None:
            res.lost.append(v)
        elif pos != a.position:
            res.moved.append((v, a.position, pos))
    res.unknown_applied = sum(1 for v in unknown if v in where)
    return res


@dataclass
class RunChecks:
    appends: AppendCheck
    registers: list[Verdict]
    replicas_equal: bool
    replica_states: dict[str, Any]
    leaders_per_term_ok: bool
    split_terms: dict[str, list[str]]
    stuck: str = ""  # the cluster did not come back after healing (then nothing could be read)

    @property
    def ok(self) -> bool:
        return (
            not self.stuck
            and self.appends.ok
            and all(v.linearizable is True for v in self.registers)
            and self.replicas_equal
            and self.leaders_per_term_ok
        )


def check_run(
    history: History,
    final: list[Any],
    replicas: dict[str, Any],
    leaders_seen: dict[str, set[str]],
    stuck: str = "",
) -> RunChecks:
    states = {name: (doc or {}).get("digest") for name, doc in replicas.items()}
    applied = {name: (doc or {}).get("applied") for name, doc in replicas.items()}
    equal = len(set(states.values())) == 1 and None not in states.values() and len(set(applied.values())) == 1
    split = {t: sorted(ids) for t, ids in leaders_seen.items() if len(ids) > 1}
    return RunChecks(
        appends=check_appends(history, final),
        registers=check_registers(history.ops),
        replicas_equal=equal,
        replica_states={n: {"applied": applied[n], "digest": states[n]} for n in replicas},
        leaders_per_term_ok=not split,
        split_terms=split,
        stuck=stuck,
    )
