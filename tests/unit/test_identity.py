"""The server's identity: ids shaped like nats-server's, and the INFO a client is greeted with."""

from __future__ import annotations

import base64
import json
import platform

import jetpy
from jetpy.server.identity import (
    JETPY_VERSION,
    NATS_COMPAT_VERSION,
    client_info,
    go_version,
    info_document,
    new_server_id,
)


def test_server_ids_look_like_nats_servers() -> None:
    ids = {new_server_id() for _ in range(20)}
    assert len(ids) == 20
    for sid in ids:
        assert len(sid) == 56 and sid[0] == "N"
        base64.b32decode(sid[1:] + "=" * (-len(sid[1:]) % 8))  # base32 throughout


def test_versions() -> None:
    assert NATS_COMPAT_VERSION == "2.10.0"
    assert jetpy.__version__ == JETPY_VERSION
    assert go_version() == f"python{platform.python_version()} jetpy{jetpy.__version__}"


def test_info_document_has_nats_servers_field_order() -> None:
    plain = info_document(
        server_id="NID",
        server_name="n",
        host="0.0.0.0",
        port=4222,
        auth_required=False,
        max_payload=1024,
        jetstream=False,
    )
    assert list(plain) == [
        "server_id",
        "server_name",
        "version",
        "proto",
        "go",
        "host",
        "port",
        "headers",
        "max_payload",
    ]
    full = info_document(
        server_id="NID", server_name="n", host="h", port=1, auth_required=True, max_payload=8, jetstream=True
    )
    assert list(full)[7:] == ["headers", "auth_required", "max_payload", "jetstream"]
    assert (full["version"], full["proto"], full["headers"]) == (NATS_COMPAT_VERSION, 1, True)


def test_client_info_is_the_document_with_the_clients_own_fields() -> None:
    doc = info_document(
        server_id="NID",
        server_name="n",
        host="h",
        port=1,
        auth_required=False,
        max_payload=8,
        jetstream=False,
    )
    line = client_info(doc, 7, "10.0.0.1")
    assert line.startswith(b"INFO {") and line.endswith(b"} \r\n")
    fields = json.loads(line[5:-3])
    assert list(fields) == [*doc, "client_id", "client_ip"]
    assert (fields["client_id"], fields["client_ip"]) == (7, "10.0.0.1")
    assert "client_id" not in doc  # the shared document is left as it was
