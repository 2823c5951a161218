"""Helpers shared by the parser tests."""

from __future__ import annotations

from jetpy.protocol.ops import PUB, PUBR, PUBS, Op


def flat(ops: list[Op]) -> list[Op]:
    """Runs of PUBs (PUBS, PUBR) as the PUBs they stand for: how reads split a stream decides
    the runs."""
    out: list[Op] = []
    for op in ops:
        if op[0] == PUBS:
            out.extend((PUB, op[1], None, 0, d, s) for d, s in zip(op[2], op[3], strict=True))
        elif op[0] == PUBR:
            out.extend((PUB, op[1], *m) for m in zip(*op[2:], strict=True))
        else:
            out.append(op)
    return out
