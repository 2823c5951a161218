"""The `jetpy` command: `jetpy server ...` runs the server, every other verb is the admin CLI.

This module sits above both so that the CLI (a client of the server over the wire) never imports
the server package itself.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    # `jetpy server info|check|report` are CLI verbs about a running server; any other `jetpy server ...`
    # (no verb, or nats-server's flags) runs the server
    if args and args[0] == "server" and args[1:2] not in (["info"], ["check"], ["report"]):
        from jetpy.server.main import main as server_main

        return server_main(args[1:])
    from jetpy.cli.main import main as cli_main

    return cli_main(args)


if __name__ == "__main__":
    sys.exit(main())
