"""An evidence package's hash chain, checked with the standard library only: python3 check_chain.py pkg/data."""

import hashlib
import json
import sys
from pathlib import Path

data = Path(sys.argv[1])  # the bag's data/ folder
lines = (data / "events.jsonl").read_text(encoding="utf-8").splitlines()
links = [json.loads(x) for x in (data / "chain.jsonl").read_text(encoding="utf-8").splitlines()]
anchor = json.loads((data / "manifest.json").read_text(encoding="utf-8"))["anchor"]
head = next(iter(json.loads((data / "digest.json").read_text(encoding="utf-8"))["tables"].values()))
KEYS = ("seq", "event_id", "prev_hash", "hash")
prev = anchor["hash"] if anchor else None
used = set()
for link in links:
    if prev is not None and link["prev_hash"] != prev:
        sys.exit(f"FAILED: seq {link['seq']}: prev_hash is not the hash of the link before it")
    if "line" in link:
        event = json.loads(lines[link["line"] - 1])
        own = event.pop("hash")
        rfc8785 = event.get("hash_version") == 2  # else dealtrail 0.2.0's: the stored key order
        text = json.dumps(event, sort_keys=rfc8785, separators=(",", ":"), ensure_ascii=False)
        if hashlib.sha256(text.encode("utf-8")).hexdigest() != own:
            sys.exit(f"FAILED: seq {link['seq']}: the event does not match its hash (altered)")
        if [event[k] for k in ("seq", "event_id", "prev_hash")] + [own] != [link[k] for k in KEYS]:
            sys.exit(f"FAILED: seq {link['seq']}: the event is not the one its chain link names")
        used.add(link["line"])
    prev = link["hash"]
if used != set(range(1, len(lines) + 1)):
    sys.exit("FAILED: events.jsonl holds an event without a chain link")
if (links[-1]["seq"], prev) != (head["head_seq"], head["head_hash"]):
    sys.exit("FAILED: the chain does not end at the digest head")
print(f"chain OK: {len(lines)} events, {len(links)} links, head seq {head['head_seq']} {prev}")
