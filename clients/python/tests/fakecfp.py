#!/usr/bin/env python3
"""A fake `cfp process --app-protocol 1` for the library's unit tests.

It speaks the application protocol as docs/scripting.md ("Application protocol") states it,
over scripted leases instead of a change feed, and checks the library's side: every answer must
carry the id of the message in flight of its lease, with a type that message allows. It writes
a JSON line per observation to $FAKECFP_LOG (argv, environment, messages, answers, violations,
checkpoints) for the tests to read.

Scenario ($FAKECFP_SCENARIO, a JSON file):
  leases: [{lease, range: {min, max}, continuation, batches: [[item, ...], ...], then: "lost"}]
  events: [event, ...]        sent after hello
  fail_start: "message"       write "cfp: message" to stderr and exit 2 before hello
  note: "message"             write "cfp: note: message" to stderr first, as cfp does for resumed leases
  fail_start_after: [line]    lines written after it, as cfp's "Try: ..." or "Run 'cfp ... --help'"
  die_after_answers: N        after N answers, exit 3 (as a crash) with a line on stderr
  retries: N                  redeliveries of a batch answered error (default 2), then skipped
  hold_after_batches: true    after the last batch, wait for stop or end of stdin
  stop_exit: N                exit status after a graceful stop (default 0)
  timeout_resend: true        only: a batch of lease 0, the same batch again (attempt 2, a new
                              id) without waiting for the answer, as cfp does once --exec-timeout
                              ran out for the first, then an event {"type": "marker"}
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any, Dict, List, Optional


def main() -> int:
    argv = sys.argv[1:]
    logf = open(os.environ["FAKECFP_LOG"], "a", buffering=1)

    def record(**kv: Any) -> None:
        logf.write(json.dumps(kv) + "\n")

    record(
        argv=argv,
        env={k: os.environ.get(k) for k in ("COSMOS_KEY", "COSMOS_CONNECTION_STRING", "COSMOS_ENDPOINT")},
        pgid_is_own=os.getpgid(0) == os.getpid(),
    )
    if argv[:3] != ["process", "--app-protocol", "1"]:
        sys.stderr.write(f"cfp: fakecfp only speaks process --app-protocol 1, not {argv[:3]}\n")
        return 2
    with open(os.environ["FAKECFP_SCENARIO"]) as f:
        sc: Dict[str, Any] = json.load(f)
    if sc.get("note"):
        sys.stderr.write("cfp: note: " + sc["note"] + "\n")
        sys.stderr.flush()
    if sc.get("fail_start"):
        sys.stderr.write("cfp: " + sc["fail_start"] + "\n")
        for line in sc.get("fail_start_after", []):
            sys.stderr.write(line + "\n")
        return 2

    out = sys.stdout
    if sc.get("timeout_resend"):
        return timeout_resend(out, record)
    next_id = [1]
    inflight: Dict[int, Dict[str, Any]] = {}  # id -> message
    by_lease: Dict[str, int] = {}  # lease -> id in flight
    queue: Dict[str, List[Dict[str, Any]]] = {}
    checkpoint: Dict[str, str] = {}
    done_pos: Dict[str, str] = {}
    answers = [0]
    retries = int(sc.get("retries", 2))

    def send(msg: Dict[str, Any]) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()

    def send_next(lease: str) -> None:
        if lease in by_lease or not queue.get(lease):
            return
        msg = dict(queue[lease].pop(0))
        msg["id"] = next_id[0]
        next_id[0] += 1
        inflight[msg["id"]] = msg
        by_lease[lease] = msg["id"]
        record(sent=msg)
        send(msg)

    send({"type": "hello", "protocol": 1, "version": "fake", "owner": "fake-host", "processor": "p", "prefix": "p"})
    for ev in sc.get("events", []):
        send({"type": "event", "event": ev})
    leases = sc.get("leases", [])
    for lz in leases:
        lease = lz["lease"]
        rng = lz.get("range", {"min": "", "max": "FF"})
        q: List[Dict[str, Any]] = [
            {"type": "acquired", "lease": lease, "range": rng, "continuation": lz.get("continuation", "")}
        ]
        for n, items in enumerate(lz.get("batches", []), 1):
            q.append({"type": "batch", "lease": lease, "range": rng, "continuation": f"{lease}:{n}", "attempt": 1, "items": items})
        if lz.get("then") == "lost":
            q.append({"type": "lost", "lease": lease})
        queue[lease] = q
        checkpoint[lease] = lz.get("continuation", "")
    for lz in leases:
        send_next(lz["lease"])

    stopping = False
    released = set()

    def all_idle() -> bool:
        return not inflight and all(not q for q in queue.values())

    def begin_release() -> None:
        for lz in leases:
            lease = lz["lease"]
            if lease in released or lease in lost:
                continue
            queue[lease] = [m for m in queue[lease] if m["type"] != "batch"]
            queue[lease].append({"type": "released", "lease": lease, "reason": "shutdown"})
            released.add(lease)
            send_next(lease)

    lost = set()
    stdin = sys.stdin
    while True:
        if stopping and all_idle():
            record(checkpoints=checkpoint)
            send({"type": "stopped", "summary": {"batches": 0, "reason": "shutdown"}})
            return int(sc.get("stop_exit", 0))
        if not stopping and all_idle() and not sc.get("hold_after_batches", True):
            record(checkpoints=checkpoint)
            send({"type": "stopped", "summary": {"reason": "stopped", "error": "nothing more to do"}})
            return 1
        line = stdin.readline()
        if not line:
            record(eof=True, pending=sorted(inflight))
            record(checkpoints=checkpoint)
            return 0
        try:
            ans = json.loads(line)
        except ValueError:
            record(violation=f"not JSON: {line!r}")
            continue
        if ans.get("type") == "stop":
            record(stop=True)
            stopping = True
            begin_release()
            continue
        mid = ans.get("id")
        msg: Optional[Dict[str, Any]] = inflight.pop(mid, None) if isinstance(mid, int) else None
        if msg is None:
            sys.stderr.write(f"cfp: answer with unknown id {mid} dropped\n")
            record(violation=f"unknown id {mid}", answer=ans)
            continue
        lease = msg["lease"]
        del by_lease[lease]
        answers[0] += 1
        record(answer=ans, to=msg["type"], lease=lease, continuation=msg.get("continuation"))
        allowed = {
            "acquired": {"done", "error"},
            "batch": {"done", "checkpoint", "error"},
            "released": {"done", "checkpoint"},
            "lost": {"done"},
        }[msg["type"]]
        if ans.get("type") not in allowed:
            record(violation=f"answer {ans.get('type')} to {msg['type']}")
        if msg["type"] == "batch":
            if ans.get("type") == "error":
                if msg["attempt"] <= retries:
                    again = dict(msg)
                    again.pop("id")
                    again["attempt"] += 1
                    queue[lease].insert(0, again)
            else:
                done_pos[lease] = msg["continuation"]
                if ans.get("type") == "checkpoint":
                    checkpoint[lease] = msg["continuation"]
                    record(checkpoint=lease, at=msg["continuation"])
        elif msg["type"] == "released" and ans.get("type") == "checkpoint" and lease in done_pos:
            checkpoint[lease] = done_pos[lease]
            record(checkpoint=lease, at=done_pos[lease])
        elif msg["type"] == "acquired" and ans.get("type") == "error":
            again = dict(msg)  # refused: offered again (cfp waits a backoff first)
            again.pop("id")
            queue[lease].insert(0, again)
        elif msg["type"] == "lost":
            lost.add(lease)
        if sc.get("die_after_answers") and answers[0] >= sc["die_after_answers"]:
            sys.stderr.write("cfp: fake crash after %d answers\n" % answers[0])
            record(crash=True)
            return 3
        send_next(lease)


def timeout_resend(out: Any, record: Any) -> int:
    def send(msg: Dict[str, Any]) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()

    send({"type": "hello", "protocol": 1, "version": "fake", "owner": "fake-host", "processor": "p", "prefix": "p"})
    batch = {"type": "batch", "lease": "0", "range": {"min": "", "max": "FF"}, "continuation": "0:1", "items": [{"id": "a"}]}
    send({**batch, "id": 1, "attempt": 1})
    send({**batch, "id": 2, "attempt": 2})
    send({"type": "event", "event": {"type": "marker"}})
    # After {"type": "stop"}, cfp goes on reading answers until the batch in flight is answered
    # (internal/sink/app.go); batch 1's answer timed out in its eyes, so batch 2's is waited for.
    stopping = False
    answered = False
    for line in sys.stdin:
        ans = json.loads(line)
        if ans.get("type") == "stop":
            stopping = True
            # A library that never answers fails the test with this line, not a hang.
            timer = threading.Timer(10, lambda: (sys.stderr.write("cfp: stop, but batch 2 was never answered\n"), sys.stderr.flush(), os._exit(3)))
            timer.daemon = True
            timer.start()
        else:
            record(answer=ans, to="batch", lease="0")
            answered = answered or ans.get("id") == 2
        if stopping and answered:
            send({"type": "stopped", "summary": {"reason": "shutdown"}})
            return 0
    record(eof=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
