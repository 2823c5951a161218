"""RouteParser: server-to-server (route) protocol bytes in, operations out. Sans-IO.

Owns the wire grammar of what a route peer sends, as nats-server 2.9 reads it (the form 2.10+
servers also speak to a peer that does not offer route pooling)::

    CONNECT <json>                        the soliciting side introduces itself
    INFO <json>                           both sides; later ones carry gossip and updates
    RS+ <account> <subject>[ <queue> <weight>]
    RS- <account> <subject>[ <queue>]
    RMSG <account> <subject> [reply ]<size>\\r\\n<payload>\\r\\n
    RMSG <account> <subject> + <reply> <queue>... <size>       (for those queue groups only)
    RMSG <account> <subject> | <queue>... <size>
    HMSG <account> <subject> ... <hdr_len> <size>\\r\\n<header block><payload>\\r\\n
    PING, PONG, +OK, -ERR '<text>'

Arguments are separated by runs of spaces or tabs (nats-server's splitArg); sizes are 1 to 9
digits. A malformed argument list is a :class:`ProtocolError` without an ``-ERR`` text (nats-server
logs it, e.g. ``processRoutedMsgArgs Parse Error: '[$G foo]'``, and closes the route), an unknown
op is ``Unknown Protocol Operation``.

The parser speaks one of three dialects of that grammar (:data:`ROUTE`, :data:`GATEWAY`,
:data:`LEAF`): a gateway's is a route's plus the account-interest lines ``A+ <account>`` and
``A- <account>``; a leaf node's names no account (one is bound to the connection)::

    LS+ <subject>[ <queue> <weight>]      LS- <subject>[ <queue>]
    LMSG <subject> [reply ]<size>         LMSG <subject> (+ <reply>|\\|) <queue>... <size>
    HMSG <subject> ... <hdr_len> <size>

and its ops carry ``b""`` as their account. On routes the leaf forms are unknown: jetpy does not
offer ``lnoc`` to its route peers, so they announce their leaf nodes' interest with RS+.

Ops are tuples (first element the code)::

    (R_MSG,   account, subject, reply | None, queues | None, hdr_len, data, sizes)
    (R_MSGS,  account, subject, datas: list[bytes], sizes: list[bytes])   # a run, see below
    (R_SIBS,  account, subjects: list[bytes], datas, sizes)              # routes only, see below
    (R_REQS,  account, subject, replies: list[bytes], datas, sizes)       # routes only, see below
    (R_SUB,   account, subject, queue | None, weight)
    (R_UNSUB, account, subject, queue | None)
    (A_SUB, account) (A_UNSUB, account)                                   # gateways only
    (CONNECT, json: bytes) (INFO, json: bytes) (ERR, text: bytes) (PING,) (PONG,) (OK,)

``data`` holds the header block then the payload; ``sizes`` is the size field as the peer
wrote it (``b"128"`` or ``b"22 150"``), which a local receiver's MSG line echoes. ``queues`` lists
the queue groups the message is for (the peer picked a member of ours for each); plain
subscribers get an RMSG whatever its queues.

Performance: as in :mod:`parser`, one regular expression takes the common ``RMSG <account>
<subject> [reply] <size>`` line, and consecutive such messages on one account and subject
without a reply come out as one ``R_MSGS`` run, so the layers above route a run once. On a
route, consecutive messages without a reply whose subjects differ in their last token only (and
that token is not empty), such as the replies to a client's requests (``_INBOX.<id>.<n>``, each
a JetStream PubAck), come out as one ``R_SIBS`` run with each message's subject; consecutive
messages on one account and subject each with a reply (requests, JetStream publishes) as one
``R_REQS`` run with each message's reply.

Knows nothing of sockets, connections, accounts or interest.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from jetpy.protocol.errors import ERR_MAX_CONTROL_LINE, ERR_UNKNOWN_OP, ProtocolError
from jetpy.protocol.framing import Framer, OpNames, op_name
from jetpy.protocol.ops import CONNECT, ERR, INFO, OK, PING, PONG, Op

__all__ = [
    "A_SUB",
    "A_UNSUB",
    "GATEWAY",
    "LEAF",
    "MAX_ROUTE_CONTROL_LINE",
    "MAX_ROUTE_PAYLOAD",
    "ROUTE",
    "R_MSG",
    "R_MSGS",
    "R_REQS",
    "R_SIBS",
    "R_SUB",
    "R_UNSUB",
    "RouteParser",
]

R_MSG: Final = 20
R_MSGS: Final = 21
R_SUB: Final = 22
R_UNSUB: Final = 23
A_SUB: Final = 24
A_UNSUB: Final = 25
R_SIBS: Final = 26
R_REQS: Final = 27

ROUTE: Final = "route"
GATEWAY: Final = "gateway"
LEAF: Final = "leaf"

MAX_ROUTE_CONTROL_LINE: Final = 64 * 1024
"""Longest route control line: a peer's RMSG carries a subject, a reply and queue names (each
bounded by its own clients' control line), so more room than a client gets, still bounded."""

MAX_ROUTE_PAYLOAD: Final = 64 * 1024 * 1024
"""Largest message a peer may send: its clients' max_payload, which nats-server warns about past
64 MB; bounds what one route can make this server buffer."""

_MAX_SIZE_DIGITS: Final = 9
_HMSG: Final = -1  # internal: an HMSG parses like RMSG with a header size
_SEP_TABLE: Final = bytes.maketrans(b"\t\r\n", b"   ")

# op name (upper case) -> (code, must a space or tab follow?), per dialect
_COMMON: Final[OpNames] = (
    (b"PING", PING, False),
    (b"PONG", PONG, False),
    (b"CONNECT", CONNECT, False),
    (b"INFO", INFO, False),
    (b"+OK", OK, False),
    (b"-ERR", ERR, True),
)
_ROUTE_NAMES: Final = (
    (b"RMSG", R_MSG, True),
    (b"RS+", R_SUB, True),
    (b"RS-", R_UNSUB, True),
    (b"HMSG", _HMSG, True),
    *_COMMON,
)
_NAMES: Final[dict[str, OpNames]] = {
    ROUTE: _ROUTE_NAMES,
    GATEWAY: (*_ROUTE_NAMES, (b"A+", A_SUB, True), (b"A-", A_UNSUB, True)),
    LEAF: (
        (b"LMSG", R_MSG, True),
        (b"LS+", R_SUB, True),
        (b"LS-", R_UNSUB, True),
        (b"HMSG", _HMSG, True),
        *_COMMON,
    ),
}
_NO_ARG: Final = frozenset((PING, PONG, OK))
_PING: Final[Op] = (PING,)
_PONG: Final[Op] = (PONG,)
_OK: Final[Op] = (OK,)

# The common message line: account, subject, an optional reply and the size (one or two fields
# before the size: three or four arguments, nats-server's forms without queue groups). A leaf
# node's line has no account: the empty group stands for it.
_FIELD: Final = rb"([!-~\x80-\xff]+)"
_TAIL: Final = b" " + _FIELD + rb" (?:" + _FIELD + rb" )?([0-9]{1,9})\r\n"
_FAST: Final[dict[str, re.Pattern[bytes]]] = {
    ROUTE: re.compile(rb"RMSG " + _FIELD + _TAIL),
    GATEWAY: re.compile(rb"RMSG " + _FIELD + _TAIL),
    LEAF: re.compile(rb"LMSG ()" + _TAIL[1:]),
}


def _size(tok: bytes) -> int:
    """nats-server's parseSize: 1-9 ASCII digits, else -1."""
    if len(tok) > _MAX_SIZE_DIGITS or not tok.isdigit():
        return -1
    return int(tok)


def _split(arg: bytes) -> list[bytes]:
    """nats-server's splitArg: fields separated by runs of space, tab, CR or LF."""
    return [f for f in arg.translate(_SEP_TABLE).split(b" ") if f]


def _show(args: list[bytes]) -> str:
    """Arguments as nats-server's errors print a byte-slice list: ``[$G foo]``."""
    return "[" + " ".join(a.decode("utf-8", "replace") for a in args) + "]"


def msg_args(
    arg: bytes, headers: bool, account: bool = True
) -> tuple[bytes, bytes, bytes | None, list[bytes] | None, int, int, bytes]:
    """An RMSG/HMSG argument line as nats-server's processRoutedMsgArgs/processRoutedHeaderMsgArgs
    read it (``account`` False: a leaf node's LMSG/HMSG, processLeafMsgArgs): (account, subject,
    reply, queues, hdr_len, size, sizes field); a leaf node's account is ``b""``."""
    args = _split(arg)
    if not account:
        args.insert(0, b"")
    n = len(args)
    if account:
        who = "processRoutedHeaderMsgArgs" if headers else "processRoutedMsgArgs"
    else:
        who = "processLeafHeaderMsgArgs" if headers else "processLeafMsgArgs"
    fixed = 4 if headers else 3  # account, subject, [hdr,] size
    if n < fixed:
        raise ProtocolError(None, f"{who} Parse Error: '{_show(args[0 if account else 1 :])}'")
    reply: bytes | None = None
    queues: list[bytes] | None = None
    if n == fixed + 1:
        reply = args[2]
    elif n > fixed + 1:
        ind = args[2]
        if ind == b"+":
            reply = args[3]
            queues = args[4 : n - (2 if headers else 1)]
        elif ind == b"|":
            queues = args[3 : n - (2 if headers else 1)]
        else:
            raise ProtocolError(None, f"{who} Bad or Missing Reply Indicator: '{_show([ind])}'")
    size = _size(args[-1])
    if size < 0:
        raise ProtocolError(None, f"{who} Bad or Missing Size: '{_show(args[0 if account else 1 :])}'")
    hdr = 0
    sizes = args[-1]
    if headers:
        hdr = _size(args[-2])
        if hdr < 0:
            raise ProtocolError(None, f"{who} Bad or Missing Header Size: '{arg.decode('utf-8', 'replace')}'")
        if hdr > size:
            raise ProtocolError(
                None, f"{who} Header Size larger then TotalSize: '{arg.decode('utf-8', 'replace')}'"
            )
        sizes = args[-2] + b" " + args[-1]
    return args[0], args[1], reply, queues, hdr, size, sizes


class RouteParser(Framer):
    """Feed bytes with :meth:`feed`; get back every complete op. Raises only ProtocolError."""

    __slots__ = ("_account", "_fast", "_names", "_siblings", "dialect")

    def __init__(
        self,
        max_control_line: int = MAX_ROUTE_CONTROL_LINE,
        max_payload: int = MAX_ROUTE_PAYLOAD,
        dialect: str = ROUTE,
    ) -> None:
        super().__init__(max_control_line, max_payload)
        self.dialect = dialect
        self._names = _NAMES[dialect]
        self._fast = _FAST[dialect]
        self._account = dialect != LEAF
        self._siblings = dialect == ROUTE  # R_SIBS and R_REQS runs (see the module)

    def _parse(self, buf: bytes, ops: list[Op]) -> int:
        n = len(buf)
        pos = 0
        max_line = self.max_control_line
        max_payload = self.max_payload
        append = ops.append
        match = self._fast.match
        startswith = buf.startswith
        run_key: tuple[bytes, bytes] | None = None  # (account, subject) of the run the last op is
        run_datas: list[bytes] | None = None
        run_sizes: list[bytes] = []
        run_line = b""  # the run's last control line: the same line again needs no parsing
        run_size = 0
        run_sz = b""
        siblings = self._siblings
        # the R_SIBS run the last op is: its subjects, data and sizes, and the subjects' shared
        # first tokens (with the dot after them) and account
        sib_subjects: list[bytes] | None = None
        sib_datas: list[bytes] = []
        sib_sizes: list[bytes] = []
        sib_head = b""
        sib_account = b""
        # the account and subject of the last op when it is a single message with a reply, and
        # the replies, data and sizes of the R_REQS run it became
        req_key: tuple[bytes, bytes] | None = None
        req_replies: list[bytes] | None = None
        req_datas: list[bytes] = []
        req_sizes: list[bytes] = []
        while pos < n:
            if run_datas is not None and startswith(run_line, pos):
                start = pos + len(run_line)
                stop = start + run_size
                if stop + 2 <= n and buf[stop] == 13 and buf[stop + 1] == 10:
                    run_datas.append(buf[start:stop])
                    run_sizes.append(run_sz)
                    pos = stop + 2
                    continue
            m = match(buf, pos)
            if m is not None:
                start = m.end()
                account, subject, reply, sz = m.groups()
                size = int(sz)
                if start - pos <= max_line and size <= max_payload:
                    nxt = start + size + 2
                    if nxt <= n:
                        if buf[nxt - 2] != 13 or buf[nxt - 1] != 10:
                            raise ProtocolError(ERR_UNKNOWN_OP, "payload not followed by CRLF")
                        data = buf[start : nxt - 2]
                        if reply is not None:
                            if req_key is not None and req_key[1] == subject and req_key[0] == account:
                                if req_replies is None:
                                    _, _, _, first_reply, _, _, first_data, first_sz = ops[-1]
                                    req_replies, req_datas, req_sizes = (
                                        [first_reply],
                                        [first_data],
                                        [first_sz],
                                    )
                                    ops[-1] = (R_REQS, account, subject, req_replies, req_datas, req_sizes)
                                req_replies.append(reply)
                                req_datas.append(data)
                                req_sizes.append(sz)
                            else:
                                append((R_MSG, account, subject, reply, None, 0, data, sz))
                                req_key = (account, subject) if siblings else None
                                req_replies = None
                            run_key = run_datas = sib_subjects = None
                            pos = nxt
                            continue
                        req_key = req_replies = None
                        if (
                            sib_subjects is not None
                            and account == sib_account
                            and subject.startswith(sib_head)
                            and len(subject) > len(sib_head)
                            and subject.find(b".", len(sib_head)) < 0
                        ):
                            sib_subjects.append(subject)
                            sib_datas.append(data)
                            sib_sizes.append(sz)
                        elif (
                            siblings
                            and run_key is not None
                            and run_datas is None
                            and run_key[0] == account
                            and run_key[1] != subject
                            and 0 < (cut := subject.rfind(b".")) < len(subject) - 1
                            and len(run_key[1]) > cut + 1
                            and run_key[1].rfind(b".") == cut
                            and run_key[1].startswith(subject[: cut + 1])
                        ):
                            # the last op, a single message, and this one: a run of siblings
                            _, _, first, _, _, _, first_data, first_sz = ops[-1]
                            sib_subjects, sib_datas, sib_sizes = (
                                [first, subject],
                                [first_data, data],
                                [first_sz, sz],
                            )
                            ops[-1] = (R_SIBS, account, sib_subjects, sib_datas, sib_sizes)
                            sib_head = subject[: cut + 1]
                            sib_account = account
                            run_key = None
                        elif run_key is not None and run_key[1] == subject and run_key[0] == account:
                            if run_datas is None:
                                _, _, _, _, _, _, first, first_sz = ops[-1]
                                run_datas, run_sizes = [first], [first_sz]
                                ops[-1] = (R_MSGS, account, subject, run_datas, run_sizes)
                            run_datas.append(data)
                            run_sizes.append(sz)
                            run_line = buf[pos:start]
                            run_size = size
                            run_sz = sz
                        else:
                            append((R_MSG, account, subject, None, None, 0, data, sz))
                            run_datas = sib_subjects = None
                            run_key = (account, subject)
                        pos = nxt
                        continue
            run_key = run_datas = sib_subjects = req_key = req_replies = None
            nxt = self._general(buf, pos, n, append)
            if nxt < 0:
                return pos
            pos = nxt
        return pos

    def _general(self, buf: bytes, pos: int, n: int, add: Callable[[Op], None]) -> int:
        """Parse the op at ``pos`` exactly; the index after it, or -1 if it is incomplete."""
        code, k = op_name(self._names, buf, pos, n, 32)
        if code == 0:
            return -1
        if code in _NO_ARG:
            nl = buf.find(b"\n", k)
            if nl < 0:
                if n - k > self.max_control_line:
                    raise ProtocolError(ERR_MAX_CONTROL_LINE)
                return -1
            add(_PING if code == PING else _PONG if code == PONG else _OK)
            return nl + 1
        a = k
        while a < n and buf[a] in (32, 9):
            a += 1
        nl = buf.find(b"\n", a)
        max_line = self.max_control_line
        if nl < 0:
            if n - a > max_line:
                raise ProtocolError(ERR_MAX_CONTROL_LINE)
            return -1
        arg = buf[a:nl]
        if arg.endswith(b"\r"):
            arg = arg[:-1]
        if len(arg) > max_line:
            raise ProtocolError(ERR_MAX_CONTROL_LINE)
        after = nl + 1
        if code in (R_MSG, _HMSG):
            account, subject, reply, queues, hdr, size, sizes = msg_args(arg, code == _HMSG, self._account)
            if size > self.max_payload:
                raise ProtocolError(None, f"route message of {size} bytes exceeds {self.max_payload}")
            stop = after + size
            if stop + 2 > n:
                if stop < n and buf[stop] != 13:
                    raise ProtocolError(ERR_UNKNOWN_OP, "payload not followed by CRLF")
                self._need = stop + 2 - pos
                return -1
            if buf[stop] != 13 or buf[stop + 1] != 10:
                raise ProtocolError(ERR_UNKNOWN_OP, "payload not followed by CRLF")
            add((R_MSG, account, subject, reply, queues, hdr, buf[after:stop], sizes))
            return stop + 2
        if code == R_SUB:
            args = _split(arg)
            if not self._account:
                self._leaf_sub(args, arg, add)
            elif len(args) == 2:
                add((R_SUB, args[0], args[1], None, 0))
            elif len(args) == 4:
                # nats-server keeps an unreadable weight as -1: that member counts for nothing
                add((R_SUB, args[0], args[1], args[2], max(_size(args[3]), 0)))
            else:
                raise ProtocolError(None, f"processRemoteSub Parse Error: '{arg.decode('utf-8', 'replace')}'")
        elif code == R_UNSUB:
            args = _split(arg)
            if not self._account:
                args.insert(0, b"")
            if len(args) == 2:
                add((R_UNSUB, args[0], args[1], None))
            elif len(args) == 3:
                add((R_UNSUB, args[0], args[1], args[2]))
            else:
                raise ProtocolError(
                    None, f"processRemoteUnsub parse error: '{arg.decode('utf-8', 'replace')}'"
                )
        elif code in (A_SUB, A_UNSUB):
            args = _split(arg)
            if len(args) != 1:
                who = "processGatewayAccountSub" if code == A_SUB else "processGatewayAccountUnsub"
                raise ProtocolError(None, f"{who} Parse Error: '{arg.decode('utf-8', 'replace')}'")
            add((code, args[0]))
        elif code == CONNECT:
            add((CONNECT, arg))
        elif code == INFO:
            add((INFO, arg))
        else:  # -ERR
            add((ERR, arg))
        return after

    @staticmethod
    def _leaf_sub(args: list[bytes], arg: bytes, add: Callable[[Op], None]) -> None:
        """``LS+ <subject>[ <queue> <weight>]`` (nats-server's processLeafSub: one argument or
        three, a queue group always with its weight)."""
        if len(args) == 1:
            add((R_SUB, b"", args[0], None, 0))
        elif len(args) == 3:
            add((R_SUB, b"", args[0], args[1], max(_size(args[2]), 0)))
        else:
            raise ProtocolError(None, f"processLeafSub Parse Error: '{arg.decode('utf-8', 'replace')}'")
