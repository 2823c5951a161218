"""Monitoring documents of the accounts: ``/accountz`` (the list, and one account's detail with
its mappings, exports and imports), ``/accstatz``, and the subscription trie's statistics over
one account or all of them (``/subsz``, ``/varz``), with nats-server 2.15.1's field names.

Owns the reading of the accounts into those documents; knows nothing of HTTP (the endpoints
call it) and changes nothing. An account's traffic (``/accstatz``) is what its clients sent and
were sent, open and closed connections alike, as nats-server counts it per account.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from jetpy.server.accounts import Account, Accounts
from jetpy.server.broker import Broker
from jetpy.server.monitor_format import go_number, go_time
from jetpy.server.options import Export, Import

__all__ = ["account_detail", "account_names", "accstatz_entries", "sublist_stats"]

# nats-server's names of a service export's response type
_RESPONSE_TYPES: Final = {"singleton": "Singleton", "stream": "Streamed", "chunked": "Chunked"}


def sublist_stats(brokers: Iterable[Broker]) -> dict[str, Any]:
    """The subscription tries' statistics, added up over ``brokers`` (nats-server's
    SublistStats: counts summed, the largest fanout, the mean fanout over cached results)."""
    subs = cache = inserts = removes = matches = hits = max_fanout = total_fanout = cached = 0
    for broker in brokers:
        tree = broker.subs
        mx, total, n = tree.fanout_stats()
        subs += tree.count
        cache += tree.cache_count()
        inserts += tree.inserts
        removes += tree.removes
        matches += tree.matches
        hits += tree.cache_hits
        max_fanout = max(max_fanout, mx)
        total_fanout += total
        cached += n
    return {
        "num_subscriptions": subs,
        "num_cache": cache,
        "num_inserts": inserts,
        "num_removes": removes,
        "num_matches": matches,
        "cache_hit_rate": go_number(hits / matches if matches else 0.0),
        "max_fanout": max_fanout,
        "avg_fanout": go_number(total_fanout / cached if cached and total_fanout else 0.0),
    }


def account_names(accounts: Accounts) -> list[str]:
    return sorted(acc.name for acc in accounts)


def account_detail(account: Account, update_time: float, leafnodes: int = 0) -> dict[str, Any]:
    """``/accountz?acc=<name>``'s ``account_detail`` (``leafnodes``: the account's leaf links)."""
    doc: dict[str, Any] = {
        "account_name": account.name,
        "update_time": go_time(update_time),
        "expired": False,
        "complete": True,
        "jetstream_enabled": account.jetstream is not None,
        "leafnode_connections": leafnodes,
        "client_connections": account.connections,
        "subscriptions": account.broker.subs.count,
    }
    opts = account.options
    if opts.mappings:
        doc["mappings"] = {
            m.source: [
                {
                    "subject": d.subject,
                    "weight": go_number(d.weight),
                    **({"cluster": d.cluster} if d.cluster else {}),
                }
                for d in m.destinations
            ]
            for m in opts.mappings
        }
    if opts.exports:
        doc["exports"] = [_export(e) for e in opts.exports]
    if opts.imports:
        doc["imports"] = [_import(i) for i in opts.imports]
    doc["name_tag"] = account.name
    doc["sublist_stats"] = sublist_stats([account.broker])
    return doc


def _export(e: Export) -> dict[str, Any]:
    out: dict[str, Any] = {"subject": e.subject, "type": e.kind}
    if e.kind == "service":
        out["response_type"] = _RESPONSE_TYPES[e.response_type]
    if e.accounts is not None:
        out["approved_accounts"] = list(e.accounts)
    return out


def _import(i: Import) -> dict[str, Any]:
    out: dict[str, Any] = {"subject": i.subject, "account": i.account}
    local = f"{i.prefix}.{i.subject}" if i.prefix else i.to or i.subject
    if i.to:
        out["to"] = i.to
    out.update(local_subject=local, type=i.kind, invalid=False, share=False, tracking=False)
    return out


def accstatz_entries(
    accounts: Accounts, clients: Iterable[Any], unused: bool, leafnodes: dict[str, int] | None = None
) -> list[dict[str, Any]]:
    """``/accstatz``'s ``account_statz``: accounts with clients or leaf links (``leafnodes``:
    their number by account; every account with ``unused``), what their clients sent
    (``received``) and were sent (``sent``)."""
    leafs = leafnodes or {}
    traffic: dict[str, list[int]] = {acc.name: list(acc.closed_traffic) for acc in accounts}
    for c in clients:
        if not c.connected:
            continue
        t = traffic.get(c.account.name)
        if t is not None:
            t[0] += c.in_msgs
            t[1] += c.out_msgs
            t[2] += c.in_bytes
            t[3] += c.out_bytes
    out: list[dict[str, Any]] = []
    for acc in sorted(accounts, key=lambda a: a.name):
        leaf = leafs.get(acc.name, 0)
        if not unused and not acc.connections and not leaf:
            continue
        in_msgs, out_msgs, in_bytes, out_bytes = traffic[acc.name]
        out.append(
            {
                "acc": acc.name,
                "name": acc.name,
                "conns": acc.connections,
                "leafnodes": leaf,
                "total_conns": acc.connections + leaf,
                "num_subscriptions": acc.broker.subs.count,
                "sent": {"msgs": out_msgs, "bytes": out_bytes},
                "received": {"msgs": in_msgs, "bytes": in_bytes},
                "slow_consumers": acc.slow_consumers,
            }
        )
    return out
