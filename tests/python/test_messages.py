"""The control channel's table of messages (launcher/control/messages.json) against the ranks'
end (python/primus): every message a rank builds is a kind of the table that says "rank", with
fields of its row, and every such kind, event and data operation is one a rank sends; the
replies a rank looks for are ones the launcher sends. tests/unit/launch_messages_test.cpp holds
the launcher's end to the same table."""

import ast
import json
from pathlib import Path

import primus

PACKAGE = Path(primus.__file__).resolve().parent
TABLE = json.loads((Path(__file__).resolve().parents[2] / "launcher" / "control" /
                    "messages.json").read_text())["kinds"]


def constant(node):
    return node.value if isinstance(node, ast.Constant) else None


def what_the_ranks_send():
    """(kinds with their fields, events, data operations sent, data operations looked for)."""
    kinds, events, ops_sent, ops_read = {}, set(), set(), set()
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict):
                keys = [constant(k) for k in node.keys]
                fields = dict(zip(keys, node.values))
                if "type" in fields and constant(fields["type"]):
                    kinds.setdefault(constant(fields["type"]), set()).update(
                        k for k in keys if k not in (None, "type"))
                if "op" in fields and constant(fields["op"]) and path.name != "_control.py":
                    ops_sent.add(constant(fields["op"]))
            elif isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                words = {k.arg: k.value for k in node.keywords if k.arg}
                if name == "dict" and "type" in words and constant(words["type"]):
                    kinds.setdefault(constant(words["type"]), set()).update(
                        k for k in words if k != "type")
                if name == "event" and node.args and constant(node.args[0]):
                    events.add(constant(node.args[0]))
                    kinds.setdefault("event", set()).update(words)
            elif isinstance(node, ast.Compare) and len(node.comparators) == 1:
                left = node.left
                if (isinstance(left, ast.Call) and getattr(left.func, "attr", None) == "get"
                        and left.args and constant(left.args[0]) == "op"):
                    ops_read.add(constant(node.comparators[0]))
    return kinds, events, ops_sent, ops_read


def test_every_message_of_a_rank_is_a_kind_of_the_table_with_its_fields():
    kinds, _, _, _ = what_the_ranks_send()
    assert {"hello", "heartbeat", "event", "goodbye"} <= set(kinds), "the messages are found"
    for kind, fields in kinds.items():
        assert kind in TABLE, f"{kind}: not in messages.json"
        assert "rank" in TABLE[kind]["from"], f"{kind}: the table does not say a rank sends it"
        extra = fields - set(TABLE[kind]["fields"])
        assert not extra, f"{kind}: fields not in the table: {extra}"


def test_every_kind_event_and_operation_of_the_ranks_in_the_table_is_sent():
    kinds, events, ops_sent, ops_read = what_the_ranks_send()
    assert {kind for kind, row in TABLE.items() if "rank" in row["from"]} == set(kinds)
    assert set(TABLE["event"]["events"]) == events
    assert set(TABLE["data"]["ops_to_launcher"]) == ops_sent
    assert ops_read and ops_read <= set(TABLE["data"]["ops_to_rank"])


def test_what_a_rank_reads_of_a_generation_notice_is_in_its_row():
    """primus._rejoin and _control read the launcher's generation notice by these keys only."""
    read = set()
    for name in ("_rejoin.py", "_control.py"):
        for node in ast.walk(ast.parse((PACKAGE / name).read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get"
                    and getattr(node.func.value, "id", None) in ("notice", "message")
                    and node.args and constant(node.args[0])):
                read.add(constant(node.args[0]))
            elif (isinstance(node, ast.Subscript) and getattr(node.value, "id", None) == "notice"
                  and constant(node.slice)):
                read.add(constant(node.slice))
            elif isinstance(node, ast.Tuple) and len(node.elts) == 2 and all(
                    constant(e) for e in node.elts) and str(constant(node.elts[0])).isupper():
                read.add(constant(node.elts[1]))  # ("MASTER_PORT", "master_port")
    assert TABLE["generation"]["from"] == ["launcher"]
    read.discard("type")
    read -= {"op", "step", "stop", "message"}  # the data replies' keys, read from `message`
    assert {"generation", "master_port", "primus_port", "resume"} <= read, read
    assert read <= set(TABLE["generation"]["fields"]), read - set(TABLE["generation"]["fields"])
