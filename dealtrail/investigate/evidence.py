"""An evidence package a regulator can check: one finding, its proof, and the means to check it.

``dealtrail evidence`` writes (and the finding page downloads) a self-contained folder or zip
(issue 22, item 5):

- ``finding.json``: the finding's stored revisions (this generation) and the rulebook revision
  and engine version that judged them; ``reviews.json``: its review history, with the video
  references reviewers attached.
- ``events.jsonl``: the events of the finding's round and every event the finding cites
  (evidence, trigger and remedy events of every revision), as stored, one JSON object a line in
  the table's seq order: nothing of other rounds beyond what the finding cites.
- ``chain.jsonl``: the table's hash-chain links from just before the first packaged event up to
  the digest head: for each stored event its seq, event ID, ``prev_hash`` and ``hash``, and for
  packaged events the line of ``events.jsonl`` that holds it. Other events are carried as hashes
  only (their content is other rounds' data).
- ``digest.json``: the table's digest (as ``dealtrail digest --out`` writes it): the head the
  chain links lead to.
- ``start-states.json``: the engine's state of the table just before each run of consecutive
  packaged events (the state the engine resumes from), with its SHA-256.
- ``manifest.json``: what the package holds, the engine version, rulebook revision and the
  plausibility limits the audit applied; ``README.md``: for the recipient.

:func:`verify_package` (``dealtrail verify-package``; no store needed) first refuses a package
not laid out as written (exactly :data:`FILES`, each once, in one folder, none too large: a
forged file with the genuine one behind it, a path out of the package or a zip bomb are refused
unread), then checks every packaged event against its own hash and its chain link, the links up
to the digest head, each start state's anchor in the chain, and re-derives the finding by
running the engine over the packaged events from those states, comparing it field by field
with ``finding.json``. It names the first event that does not verify, and says what the chain
does not prove (:data:`NOT_PROVEN`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import struct
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dealtrail.investigate.bag import (
    MANIFEST,
    SIGNED,
    SIGNED_SIGNATURE,
    TAG_FILES,
    TAGMANIFEST,
    BagError,
    check_bag,
    make_bag,
    read_manifest,
)
from dealtrail.investigate.bag import info as bag_info
from projections.records.signing import SIGNATURE_SUFFIX, SigningError, key_id, public_pem, sign
from projections.records.signing import verify as verify_signature
from projections.records.signing_keys import validity_problem
from schemas.canonical import JCS, canonical_sha256
from schemas.chain import chain_hash
from schemas.codec import DecodeError, decode
from schemas.findings import Finding
from streams.engine import EventRejected, Plausibility, TableState, apply
from streams.engine.catalog import ENGINE_VERSION, RULEBOOK_REVISION
from streams.engine.state import dump_state, load_state

if TYPE_CHECKING:
    import duckdb
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

FORMAT = "dealtrail-evidence-3"
"""The package format's name and version (``manifest.json``'s ``format``): a BagIt bag whose
payload (``data/``) holds :data:`FILES`, hashed in RFC 8785 form, with the chain checker
:data:`CHECKER` beside it, every file in a manifest, signed when a key is set (the signature
:data:`dealtrail.investigate.bag.SIGNED_SIGNATURE` of the tag files' hashes,
:data:`dealtrail.investigate.bag.SIGNED`)."""
BAG_FORMAT_2 = "dealtrail-evidence-2"
"""The format of packages made before issue 47 (signature ``tagmanifest-sha256.txt.sig`` over the
tag manifest, the key outside it, no checker): still verified."""
BAG_FORMATS = (FORMAT, BAG_FORMAT_2)
"""The formats of a package that is a BagIt bag."""
CHECKER = "check_chain.py"
"""The standard-library script that checks the package's hash chain, carried at the bag's top
(the same as docs/integrity.md's "Checking a package without dealtrail")."""
LEGACY_FORMAT = "dealtrail-evidence-1"
"""The format of dealtrail 0.2.0's packages (:data:`FILES` at the top, no bag, no signature):
still verified."""
SIGNATURE_2 = TAGMANIFEST + SIGNATURE_SUFFIX
"""A :data:`BAG_FORMAT_2` package's detached signature over its tag manifest."""
PUBLIC_KEY = "signing-key.pem"
"""The public key the signature verifies with (compare its ID with the property's registered key)."""
BAG_TAGS = (*TAG_FILES, CHECKER, PUBLIC_KEY, SIGNED, SIGNED_SIGNATURE, SIGNATURE_2)
"""The files a bag may hold at its top."""
SIGNED_TAGS = ("bagit.txt", "bag-info.txt", MANIFEST, CHECKER, PUBLIC_KEY)
"""What the signature of a :data:`FORMAT` package must cover (through :data:`dealtrail.investigate.bag.SIGNED`)."""


def checker_script() -> bytes:
    """The chain checker every package carries (:data:`CHECKER`)."""
    return (Path(__file__).parent / "templates" / CHECKER).read_bytes()


FILES = (
    "README.md",
    "manifest.json",
    "finding.json",
    "reviews.json",
    "events.jsonl",
    "chain.jsonl",
    "digest.json",
    "start-states.json",
)
"""Every file of a package, in the order they are written."""

_FINDING_COLS = (
    "finding_id", "revision", "rule_id", "citation", "game", "severity", "provisional", "table_id",
    "round_id", "evidence_event_ids", "required_remedy", "status", "message", "trigger_event_id",
    "observed_at", "remedy_event_ids", "remedy_delay_seconds", "late",
)  # fmt: skip


class EvidenceError(ValueError):
    """The package cannot be made: unknown finding, no chain, a digest that does not cover it."""


@dataclass
class Package:
    """A package: its payload files (name -> bytes), the whole bag, and what the caller reports.

    Attributes:
        files: the payload, :data:`FILES` by name (``data/`` of the bag).
        bag: every file of the BagIt bag by relative path (tag files, signature, ``data/...``).
        key_id: the ID of the key that signed it (None: not signed).
    """

    finding_id: str
    files: dict[str, bytes]
    events: int
    links: int
    bag: dict[str, bytes] = field(default_factory=dict)
    key_id: str | None = None

    def write(self, out: Path) -> Path:
        """Write the bag into the folder ``out`` (created owner-only, folders 0700, files 0600).

        Raises:
            EvidenceError: ``out`` exists and is not an empty folder (a package is never
                written over another one).
        """
        from projections.store.private import make_private_dirs, open_private

        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise EvidenceError(f"{out} exists and is not an empty folder: choose a new --out")
        make_private_dirs(out / "data")
        for rel, data in self.bag.items():
            with open_private(out / rel, binary=True) as fh:
                fh.write(data)
        return out

    def zip_bytes(self, folder: str) -> bytes:
        """The bag as a zip whose entries lie in ``folder/`` (fixed entry times: the same
        package gives the same bytes)."""
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for rel, data in self.bag.items():
                info = zipfile.ZipInfo(f"{folder}/{rel}", date_time=(2000, 1, 1, 0, 0, 0))
                info.external_attr = 0o600 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, data)
        return buf.getvalue()


def _dumps(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, default=str) + "\n").encode()


def _finding_revisions(con: duckdb.DuckDBPyConnection, finding_id: str) -> list[Finding]:
    rows = con.execute(
        f"SELECT {', '.join(_FINDING_COLS)} FROM findings_generation WHERE finding_id = ? ORDER BY revision",
        [finding_id],
    ).fetchall()
    out = []
    for row in rows:
        rec = dict(zip(_FINDING_COLS, row, strict=True))
        rec["evidence_event_ids"] = tuple(rec["evidence_event_ids"])
        rec["remedy_event_ids"] = tuple(rec["remedy_event_ids"] or ())
        out.append(Finding.model_validate(rec))
    return out


def _saved_head(table_id: str, digest: dict[str, Any]) -> dict[str, Any]:
    """The head of ``table_id`` in a saved digest's ``tables``.

    Raises:
        EvidenceError: the digest has no (well-formed) head for the table.
    """
    head = digest.get(table_id)
    if not isinstance(head, dict) or not {"head_seq", "head_hash"} <= set(head):
        raise EvidenceError(f"the digest holds no head (head_seq, head_hash) for table {table_id!r}")
    return {"head_seq": int(head["head_seq"]), "head_hash": str(head["head_hash"]), "events": head.get("events")}


def _link_problem(text: str, data: dict[str, Any], head_hash: str | None) -> str | None:
    """Why a stored event does not continue the chain whose head hash is ``head_hash`` (None: it does)."""
    if data.get("hash") is None:
        return "the event carries no hash: the trail is not chained there"
    try:
        event = decode(text)
    except DecodeError as exc:
        return f"the stored event no longer decodes ({exc.reason})"
    if chain_hash(event) != event.hash:
        return "content does not match its hash (altered)"
    if head_hash is not None and event.prev_hash != head_hash:
        return "prev_hash is not the previous event's hash (inserted, deleted or moved)"
    return None


def build_package(
    con: duckdb.DuckDBPyConnection,
    finding_id: str,
    limits: Plausibility | None,
    generated_at: datetime,
    digest: dict[str, Any] | None = None,
    signer: Ed25519PrivateKey | None = None,
    property_name: str | None = None,
    made_by: str = "dealtrail evidence",
) -> Package:
    """Gather the evidence package of one finding from the store.

    Args:
        con: a connection to the store (read-only is enough).
        finding_id: the finding (32 hex characters).
        limits: the plausibility limits the audit applied (``settings.plausibility``, rulebook
            10.3.4): recorded in the manifest, the verifier applies the same; None: none checked.
        generated_at: when the package is made (timezone-aware), written to the manifest.
        digest: a saved digest's ``tables`` (``dealtrail digest --out``); None: the table's
            chain head now, computed as ``dealtrail digest`` does.
        signer: the property's signing key (:func:`projections.records.signing.load_key`): the bag's tag
            manifest is signed with it; None: the package is not signed.
        property_name: the property (``bag-info.txt``'s ``Source-Organization``); None: not named.
        made_by: who made the package (a console user's name, or the command).

    Returns:
        The :class:`Package` (nothing written yet).

    Raises:
        EvidenceError: no such finding in the store's latest generation; a cited event the
            store does not hold; the trail is not chained, or its chain is broken (without a
            digest); the digest's head lies before the finding's last event.
    """
    from dealtrail.investigate.replay import Window, snapshot_start
    from projections.models import reviews
    from projections.models.conflicts import conflicting_copies

    revisions = _finding_revisions(con, finding_id)
    if not revisions:
        raise EvidenceError(f"no finding {finding_id!r} in the store's latest generation")
    first = revisions[0]
    table_id = first.table_id
    cited = {first.trigger_event_id}
    for f in revisions:
        cited |= {f.trigger_event_id, *f.evidence_event_ids, *f.remedy_event_ids}
    rows = con.execute(
        """SELECT DISTINCT seq FROM events WHERE table_id = $t
           AND (event_id IN (SELECT unnest($ids)) OR ($round IS NOT NULL AND round_id = $round))""",
        {"t": table_id, "ids": sorted(cited), "round": first.round_id},
    ).fetchall()
    seqs = sorted(int(r[0]) for r in rows)
    found = {
        str(r[0])
        for r in con.execute(
            "SELECT event_id FROM events WHERE table_id = ? AND event_id IN (SELECT unnest(?))",
            [table_id, sorted(cited)],
        ).fetchall()
    }
    if cited - found:
        raise EvidenceError(f"the store holds no event {sorted(cited - found)[0]} that the finding cites")
    wanted = set(seqs)
    given = _saved_head(table_id, digest) if digest is not None else None
    if given is not None and given["head_seq"] < seqs[-1]:
        raise EvidenceError(
            f"the digest's head of {table_id} (seq {given['head_seq']}) lies before the finding's last event "
            f"(seq {seqs[-1]}): use a later digest, or none (the chain's head nearest after the finding)"
        )

    # One pass over the table's stored events from a checked snapshot (or its first event):
    # the engine state before each run of consecutive packaged seqs, and the chain links from
    # just before the first packaged event up to the digest head (a saved one, or else the head
    # of the intact chain nearest after the finding: up to the table's head or the next break).
    first_id = con.execute(
        "SELECT event_id FROM events WHERE table_id = ? AND seq = ? ORDER BY arrival LIMIT 1", [table_id, seqs[0]]
    ).fetchall()[0][0]
    start = snapshot_start(con, table_id, Window(), at=str(first_id))
    state: TableState | None = start.state
    states: list[dict[str, Any]] = []
    anchor: dict[str, Any] | None = None
    last: tuple[int, str, str | None] | None = None  # seq, event ID, hash of the chain head so far
    if state is not None and start.last_event_id is not None:
        last = (start.last_seq, start.last_event_id, state.last_hash)
    lines: list[str] = []
    links: list[dict[str, Any]] = []
    # A later record that claims an event ID already in the trail with other content (a
    # conflicting copy, issue 46 item 3) is not part of the chain: it is shown in the manifest,
    # beside the record the trail keeps, and left out of the links and the engine's walk.
    conflicts = {(c.event_id, c.other.arrival): c for c in conflicting_copies(con, table_id)}
    copies: list[dict[str, Any]] = []
    cur = con.execute(
        """SELECT event_id, seq, payload::VARCHAR, arrival FROM events WHERE table_id = ? AND seq > ? AND seq <= ?
           ORDER BY seq, arrival""",
        [table_id, start.last_seq, given["head_seq"] if given is not None else 2**62],
    )
    previous_seq: int | None = None
    stop = False
    while not stop and (batch := cur.fetchmany(10_000)):
        for event_id, stored_seq, payload, arrival in batch:
            seq = int(stored_seq)
            text = str(payload)
            data = json.loads(text)
            conflict = conflicts.get((str(event_id), int(arrival)))
            if conflict is not None:
                if seq in wanted:
                    copies.append({**conflict.as_json(), "other_record": data})
                continue
            if seq >= seqs[0]:
                if anchor is None:
                    anchor = {"seq": last[0], "event_id": last[1], "hash": last[2]} if last else None
                problem = _link_problem(text, data, last[2] if last else None)
                if problem is not None:
                    if seq <= seqs[-1]:
                        raise EvidenceError(
                            f"the chain of {table_id} is broken at seq {seq}, event {event_id}, among the finding's "
                            f"events ({problem}): no chain proof can be made for it (see dealtrail verify)"
                        )
                    if given is not None:
                        raise EvidenceError(
                            f"the chain of {table_id} is broken at seq {seq}, event {event_id} ({problem}), before "
                            f"the digest's head at seq {given['head_seq']}: use an earlier digest, or none"
                        )
                    stop = True  # the nearest head: the last link before the break
                    break
                link: dict[str, Any] = {
                    "seq": seq,
                    "event_id": str(event_id),
                    "prev_hash": data.get("prev_hash"),
                    "hash": data["hash"],
                }
                if seq in wanted:
                    if previous_seq is None or (previous_seq not in wanted and seq != previous_seq):
                        states.append(
                            {
                                "first_seq": seq,
                                "first_line": len(lines) + 1,
                                "state": json.loads(dump_state(state)) if state is not None else None,
                            }
                        )
                    lines.append(text)
                    link["line"] = len(lines)
                links.append(link)
            if seq <= seqs[-1]:
                with contextlib.suppress(DecodeError, EventRejected):  # refused as by the audit and the verifier
                    state, _ = apply(state, decode(text), limits=limits)
            if last is None or seq > last[0]:
                last = (seq, str(event_id), data.get("hash"))
            previous_seq = seq
    assert last is not None
    if given is not None and (last[0] != given["head_seq"] or last[2] != given["head_hash"]):
        raise EvidenceError(
            f"the stored chain of {table_id} does not pass through the digest's head at seq {given['head_seq']} "
            "(see dealtrail verify --against)"
        )
    chained = con.execute(
        "SELECT count(*) FROM events WHERE table_id = ? AND seq <= ? AND payload->>'hash' IS NOT NULL",
        [table_id, last[0]],
    ).fetchall()[0][0]
    head = given if given is not None else {"head_seq": last[0], "head_hash": last[2], "events": int(chained)}
    for s in states:
        s["hash_version"] = JCS
        s["state_sha256"] = canonical_sha256(s["state"])
    review_rows = reviews.history(con, finding_id) if reviews.has_console_tables(con) else []
    finding_doc = {
        "finding_id": finding_id,
        "table_id": table_id,
        "round_id": first.round_id,
        "rule_id": first.rule_id,
        "citation": first.citation,
        "engine_version": ENGINE_VERSION,
        "rulebook_revision": RULEBOOK_REVISION,
        "revisions": [f.model_dump(mode="json") for f in revisions],
    }
    manifest = {
        "format": FORMAT,
        "finding_id": finding_id,
        "table_id": table_id,
        "round_id": first.round_id,
        "rule_id": first.rule_id,
        "generated_at": generated_at.astimezone(UTC).isoformat(),
        "engine_version": ENGINE_VERSION,
        "rulebook_revision": RULEBOOK_REVISION,
        "plausibility": None
        if limits is None
        else {"max_seq_jump": limits.max_seq_jump, "max_clock_skew_seconds": limits.max_clock_skew.total_seconds()},
        "events": len(lines),
        "chain_links": len(links),
        "hash_only_links": sum(1 for x in links if "line" not in x),
        "anchor": anchor,
        "digest_source": "a saved digest"
        if digest is not None
        else "the head of the table's intact chain nearest after the finding, when the package was made",
        "files": list(FILES),
        "conflicting_copies": copies,
    }
    files = {
        "manifest.json": _dumps(manifest),
        "finding.json": _dumps(finding_doc),
        "reviews.json": _dumps(reviews.review_rows_json(review_rows)),
        "events.jsonl": "".join(line + "\n" for line in lines).encode(),
        "chain.jsonl": "".join(json.dumps(x, sort_keys=True) + "\n" for x in links).encode(),
        "digest.json": _dumps({"tables": {table_id: head}}),
        "start-states.json": _dumps(states),
    }
    files["README.md"] = readme(manifest, first).encode()
    info: dict[str, str] = {
        "Source-Organization": property_name or "property not named",
        "External-Identifier": f"finding {finding_id}",
        "External-Description": f"{first.rule_id} ({first.citation}) at table {table_id}, round {first.round_id}",
        "Bagging-Date": generated_at.astimezone(UTC).date().isoformat(),
        "Bagging-Time": generated_at.astimezone(UTC).isoformat(),
        "Contact-Name": made_by,
        "Bag-Software-Agent": f"dealtrail (engine {ENGINE_VERSION}, rulebook revision {RULEBOOK_REVISION})",
        "Dealtrail-Format": FORMAT,
    }
    kid = None
    if signer is not None:
        pem = public_pem(signer)
        kid = key_id(pem)
        info["Dealtrail-Signing-Key"] = kid
    tags = {CHECKER: checker_script()}
    if signer is not None:
        tags[PUBLIC_KEY] = pem
    key = signer
    bag = make_bag(
        {name: files[name] for name in FILES},
        info,
        tags,
        (lambda data: sign(key, data)) if key is not None else None,
    )
    return Package(finding_id, files, len(lines), len(links), bag, kid)


def _conflicts_text(manifest: dict[str, Any]) -> str:
    """The README's paragraph on conflicting copies (none: empty)."""
    copies = manifest.get("conflicting_copies") or []
    if not copies:
        return ""
    lines = ["", "## Conflicting copies", ""]
    lines.append(
        "Records that claim an event ID of this package with other content than the record the trail keeps. "
        "The kept record is in `events.jsonl` and the chain; the other is in `manifest.json` "
        "(`conflicting_copies[].other_record`), outside the chain (its content does not match the chain), "
        "so it is not proven by it, and a finding it raised cannot be raised again from the packaged events."
    )
    lines.append("")
    lines += [f"- {c['message']}" for c in copies]
    return "\n".join(lines) + "\n"


def readme(manifest: dict[str, Any], finding: Finding) -> str:
    """The package's README for its recipient: what the finding is, what each file holds and how to check it."""
    return f"""# Evidence package: finding {manifest["finding_id"]}

**{finding.rule_id}** ({finding.citation}) at table {manifest["table_id"]}, \
round {manifest["round_id"] or "(between rounds)"}.

{finding.message}
{_conflicts_text(manifest)}
Made {manifest["generated_at"]} by dealtrail, engine {manifest["engine_version"]}, rulebook revision \
{manifest["rulebook_revision"]}.

## How to check it

This file lies in the payload (`data/`) of a BagIt bag (RFC 8493). Without dealtrail, in the folder
that holds the bag (called `pkg` here), with the property's registered public key in
`registered-key.pem`:

    bagit.py --validate pkg
    openssl pkeyutl -verify -pubin -inkey registered-key.pem -rawin \\
        -in pkg/signed-sha256.txt -sigfile pkg/signed-sha256.txt.sig
    (cd pkg && sha256sum --quiet -c signed-sha256.txt)

The first checks that every file is there and unchanged, the second that the property signed the
bag (when it is signed: `bag-info.txt` names the key), and the third that the signed list of the
tag files' SHA-256 (which covers `bag-info.txt` and `manifest-sha256.txt`, and so every file) is
the bag's. The hash chain is checked with the standard-library script the bag carries:

    python3 pkg/check_chain.py pkg/data

With dealtrail installed (the same engine version, or one of the same rulebook revision), and no
access to the casino's database:

    dealtrail verify-package PATH-TO-THIS-FOLDER   (or the .zip)

It exits 0 and says "verified" only if all of these hold; otherwise it names the first event,
link or file that does not verify and exits 4:

0. The package holds exactly the files listed below, each once, in one folder (or a zip whose
   members lie in one folder, or none): nothing else, nothing nested, no file over 64 MiB.
1. Every event in `events.jsonl` still matches its own SHA-256 (`hash`, computed over the event's
   canonical JSON without its `hash` field) and the chain link of its seq in `chain.jsonl`.
2. Each link's `prev_hash` is the `hash` of the link before it, from the anchor (the event just
   before the first packaged one) up to the head in `digest.json`.
3. Each engine state in `start-states.json` carries, as its last hash, the chain's head just
   before the events it is applied to.
4. Running the engine from those states over the packaged events raises the finding again: every
   revision in `finding.json`, every field the same (message, severity, rule, citation, table,
   round, evidence, status, trigger, time, remedy ...); an edited field is named.

Compare the head in `digest.json` (`head_seq`, `head_hash`) with a digest of this table the casino
gave you earlier or keeps with a third party (`dealtrail digest --out`): when they are the same,
the packaged events are the ones that trail held then.

## What each file is

| File | What it holds |
|---|---|
| `finding.json` | The finding's stored revisions (raised, remedied, overdue ...), engine version, rulebook revision |
| `reviews.json` | Its review history: who acknowledged, assigned, disposed it, when, notes and video references |
| `events.jsonl` | The events of the finding's round and every event it cites, one JSON object a line, as stored |
| `chain.jsonl` | The hash-chain links from the anchor to the digest head (`line`: the event's line in `events.jsonl`) |
| `digest.json` | The table's digest head (`{manifest["digest_source"]}`) |
| `start-states.json` | The engine's state of the table before each run of packaged events, with its SHA-256 |
| `manifest.json` | What the package holds, the engine version, rulebook revision and plausibility limits applied |

## What it proves, and what it does not

- The packaged events are proven by their own hashes and their links to the digest head.
  {manifest["hash_only_links"]} link(s) of other rounds' events are carried as hashes only (no
  personal data of other rounds is in the package): their contents are not in the package, so the
  step from one of them to the next is a consistency check that rests on the digest head, not a
  recomputation. The casino can show those events to an authorised examiner, who checks them
  with `dealtrail verify`.
- The engine states are the casino's engine's summary of the table's history before the round
  (devices, decks, open remedies, the previous round's seats and wagers); they are anchored in
  the chain by their last hash, but their content is the engine's, not re-derived here.
- The chain proves that the trail was not altered after it was recorded; it says nothing about
  events that were wrong when they were first recorded.
- Not proven by the chain, and said so by `verify-package` each time: `reviews.json` (the
  casino's review record: who acknowledged, assigned, disposed or approved the finding, their
  notes and video references, as the casino's database holds them); `start-states.json` (the
  engine's summary of earlier events: anchored by its last hash only, its content not
  re-derived); the manifest's descriptive fields and this README.
"""


# --- verification ---------------------------------------------------------------------------


@dataclass
class PackageReport:
    """The outcome of :func:`verify_package`.

    Attributes:
        ok: True if every check passed.
        problem: the first check that failed, one sentence (None when ok).
        event_id: the event (or link) it failed at, if any.
        notes: what was checked, and warnings (a rulebook revision other than the engine's).
    """

    ok: bool = True
    problem: str | None = None
    event_id: str | None = None
    notes: list[str] = field(default_factory=list)

    def fail(self, problem: str, event_id: str | None = None) -> PackageReport:
        """Record the first failure (later ones are not recorded) and return self."""
        if self.ok:
            self.ok, self.problem, self.event_id = False, problem, event_id
        return self


MAX_FILE_BYTES = 64 * 2**20
"""The largest file a package may hold (64 MiB, uncompressed). A package holds one round's events
and those its finding cites, their chain links up to the digest head and a few engine states: a
few MB at most. The verifier refuses a larger file before reading it (and reads every file with a
bounded reader, since a zip's recorded sizes can lie), so a zip bomb cannot exhaust its memory."""

MAX_TOTAL_BYTES = 256 * 2**20
"""The most all files of a package may hold together (256 MiB, uncompressed)."""


class PackageRefused(EvidenceError):
    """The package is not laid out as ``dealtrail evidence`` writes it (a file missing, unknown,
    twice, nested, named outside the package, or too large): it is not checked further, and
    :func:`verify_package` reports it as a failed check."""


def _read_bounded(fh: Any, name: str, total: int) -> bytes:
    """At most :data:`MAX_FILE_BYTES` of ``fh`` (and no more than the total allows).

    Raises:
        PackageRefused: the file holds more.
    """
    room = min(MAX_FILE_BYTES, MAX_TOTAL_BYTES - total)
    data: bytes = fh.read(room + 1)
    if len(data) > room:
        raise _too_large(name, len(data), total)
    return data


def _too_large(name: str, size: int, total: int) -> PackageRefused:
    if size > MAX_FILE_BYTES:
        return PackageRefused(
            f"{name} holds more than {MAX_FILE_BYTES / 2**20:g} MiB: larger than any package's file, refused unread"
        )
    return PackageRefused(
        f"the package's files hold more than {MAX_TOTAL_BYTES / 2**20:g} MiB together (at {name}): refused unread"
    )


MAX_ZIP_MEMBERS = 64
"""The most members a package zip's directory may list (a package holds 8 files and a folder):
checked from the zip's end record before the directory is read, so a zip listing millions of
members cannot exhaust memory either."""


def _check_directory(path: Path) -> None:
    """Refuse a zip larger than a package can be, or whose end record lists more than
    :data:`MAX_ZIP_MEMBERS` members (or a ZIP64 directory, which no package needs), before its
    directory is read. A file with no end record is left to :mod:`zipfile` (not a zip).

    Raises:
        PackageRefused: as above.
    """
    size = path.stat().st_size
    if size > MAX_TOTAL_BYTES:
        raise PackageRefused(f"{path} holds more than {MAX_TOTAL_BYTES / 2**20:g} MiB: larger than any package")
    with path.open("rb") as fh:
        fh.seek(max(0, size - (22 + 0xFFFF)))  # the end record (22 bytes) and a comment of up to 64 KiB
        tail = fh.read()
    at = len(tail) - 22 if tail[-22:-18] == b"PK\x05\x06" else tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        return
    members, directory_size = struct.unpack_from("<HI", tail, at + 10)
    if members > MAX_ZIP_MEMBERS or directory_size > MAX_ZIP_MEMBERS * 1024:
        raise PackageRefused(
            f"{path} lists {members} members in a {directory_size}-byte directory: a package holds {len(FILES)} "
            "files, refused unread"
        )


class _Folder:
    """Read a package from a folder or a zip (whose files lie in one folder, or none).

    Its layout is checked first, before any content. A package of :data:`FORMAT` is a BagIt bag:
    the tag files (:data:`dealtrail.investigate.bag.TAG_FILES`, and the signature and public key when
    signed) at its top and the payload as plain files in ``data/`` (which files the payload
    holds is the bag's manifest's to say: :func:`dealtrail.investigate.bag.check_bag`). A package of
    :data:`LEGACY_FORMAT` (0.2.0) holds exactly :data:`FILES` at its top. Either way: each file
    once, none larger than :data:`MAX_FILE_BYTES` (:data:`MAX_TOTAL_BYTES` together); in a zip,
    no member twice, nested deeper, absolute or with ``..``, none outside the package's folder;
    in a folder, no link and no other subfolder.

    Attributes:
        files: relative path (``data/events.jsonl``, ``bagit.txt``; ``events.jsonl`` in a 0.2.0
            package) -> bytes.
        bag: True for a BagIt bag.

    Raises:
        EvidenceError: no package at the path, or neither a folder nor a zip.
        PackageRefused: the layout is not a package's (the message names the member or file).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.files: dict[str, bytes] = {}
        self.bag = False
        if path.is_file():
            self._read_zip(path)
        elif path.is_dir():
            self.bag = (path / "bagit.txt").exists()
            self._read_folder(path)
        else:
            raise EvidenceError(f"no package at {path}")
        if not self.bag:
            missing = [name for name in FILES if name not in self.files]
            if missing:
                raise PackageRefused(f"the package has no {missing[0]}")

    def _take(self, rel: str, what: str) -> None:
        """Refuse the file at ``rel`` (shown as ``what``) unless the layout has a place for it, not yet taken."""
        parts = rel.split("/")
        if self.bag:
            fits = (len(parts) == 1 and parts[0] in BAG_TAGS) or (len(parts) == 2 and parts[0] == "data")
            allowed = f"{', '.join(BAG_TAGS)} and data/"
        else:
            fits, allowed = len(parts) == 1 and parts[0] in FILES, ", ".join(FILES)
        if not fits:
            raise PackageRefused(
                f"{what} is not a file of an evidence package: refused (a package holds only {allowed})"
            )
        if rel in self.files:
            raise PackageRefused(f"{what}: the package holds {rel} twice: refused")

    def _read_zip(self, path: Path) -> None:
        _check_directory(path)
        try:
            zf = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError):
            raise EvidenceError(f"{path} is neither a package folder nor a zip") from None
        try:
            with zf:
                self._read_members(zf)
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
            # a damaged member (its CRC or size does not match), or one compressed or encrypted
            # in a way this reader does not read
            raise PackageRefused(f"{path}: a member cannot be read ({type(exc).__name__}: {exc}): refused") from None

    def _top(self, zf: zipfile.ZipFile) -> str:
        """The zip's package folder ('' for none): where its first ``bagit.txt`` lies (a bag),
        else its first ``manifest.json`` (a 0.2.0 package)."""
        names = [i.filename for i in zf.infolist()]
        for marker in ("bagit.txt", "manifest.json"):
            for name in names:
                parts = name.split("/")
                if parts[-1] == marker and len(parts) <= 2:
                    self.bag = marker == "bagit.txt"
                    return parts[0] if len(parts) == 2 else ""
        return ""

    def _read_members(self, zf: zipfile.ZipFile) -> None:
        top = self._top(zf)
        total = 0
        for info in zf.infolist():
            raw = info.filename
            what = f"zip member {raw!r}"
            parts = raw.rstrip("/").split("/")
            if raw.startswith("/") or "\\" in raw or ":" in parts[0] or any(p in ("", ".", "..") for p in parts):
                raise PackageRefused(f"{what}: an absolute, empty or '..' path: refused")
            if top:
                if parts[0] != top or (len(parts) == 1 and not info.is_dir()):
                    raise PackageRefused(f"{what} lies outside the package's folder {top}/: refused")
                parts = parts[1:]
            if info.is_dir():
                if (parts and parts != ["data"]) or (parts == ["data"] and not self.bag):
                    raise PackageRefused(f"{what}: nested deeper than the package's one folder: refused")
                continue
            if len(parts) > (2 if self.bag and parts[0] == "data" else 1):
                raise PackageRefused(f"{what}: nested deeper than the package's one folder: refused")
            if len(parts) == 2 and not top and not self.bag:
                raise PackageRefused(f"{what} lies outside the package's folder (none): refused")
            rel = "/".join(parts)
            self._take(rel, what)
            if info.file_size > MAX_FILE_BYTES or total + info.file_size > MAX_TOTAL_BYTES:
                raise _too_large(what, info.file_size, total)
            with zf.open(info) as fh:
                data = _read_bounded(fh, what, total)
            total += len(data)
            self.files[rel] = data

    def _read_folder(self, path: Path, prefix: str = "", total: int = 0) -> int:
        for entry in sorted(path.iterdir()):
            rel = prefix + entry.name
            what = f"{rel!r} in the package folder"
            if self.bag and not prefix and entry.name == "data" and entry.is_dir() and not entry.is_symlink():
                total = self._read_folder(entry, "data/", total)
                continue
            self._take(rel, what)
            if entry.is_symlink() or not entry.is_file():
                raise PackageRefused(f"{what} is not a regular file (a folder or a link): refused")
            size = entry.stat().st_size
            if size > MAX_FILE_BYTES or total + size > MAX_TOTAL_BYTES:
                raise _too_large(what, size, total)
            with entry.open("rb") as fh:
                data = _read_bounded(fh, what, total)
            total += len(data)
            self.files[rel] = data
        return total

    def read(self, name: str) -> bytes:
        """The payload file ``name`` (in ``data/`` of a bag).

        Raises:
            PackageRefused: the package holds no such file.
        """
        rel = f"data/{name}" if self.bag else name
        if rel not in self.files:
            raise PackageRefused(f"the package has no {rel}")
        return self.files[rel]


def _json(folder: _Folder, name: str) -> Any:
    try:
        return json.loads(folder.read(name))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise EvidenceError(f"{name} is not JSON: {exc}") from None


def _jsonl(folder: _Folder, name: str) -> Iterator[tuple[int, str]]:
    text = folder.read(name).decode("utf-8", "replace")
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield n, line


def verify_package(
    path: Path, public_key: bytes | None = None, keys: list[dict[str, Any]] | None = None
) -> PackageReport:
    """Check an evidence package without the store (see the module docstring for the checks).

    Args:
        path: the package's folder, or its zip.
        public_key: the property's registered public key (PEM): the package must be signed
            with it. None: a signature is checked with the key the package carries, and its
            ID reported for the recipient to compare with the registered one.
        keys: the store's recorded keys with their validity periods
            (:func:`projections.records.signing_keys.history`): a signed package must have been
            made (its ``Bagging-Time``) within its key's period, else it fails naming the key and
            the dates. None (no store at hand): the notes say the validity was not checked.

    Returns:
        The :class:`PackageReport`: ``ok`` (its notes end with :data:`NOT_PROVEN`), or the
        first problem and the event it is at. A package not laid out as ``dealtrail evidence``
        writes it (a file missing, unknown, twice, nested, absolute, with ``..``, or larger
        than :data:`MAX_FILE_BYTES` / :data:`MAX_TOTAL_BYTES`) fails, naming the member.

    Raises:
        EvidenceError: the path is no folder or zip, cannot be read, or a file of it is not JSON.
    """
    report = PackageReport()
    try:
        folder = _Folder(path)
        _verify(folder, report, public_key, keys)
    except PackageRefused as exc:
        report.fail(str(exc))
    except OSError as exc:  # a file that cannot be read (permissions, a disk error)
        raise EvidenceError(f"cannot read the package at {path}: {exc}") from None
    except _Failed as exc:
        report.fail(exc.problem, exc.event_id)
    except EvidenceError:
        raise
    except (KeyError, TypeError, ValueError) as exc:  # a field missing or of the wrong kind (pydantic's errors too)
        report.fail(f"the package is malformed or made by an engine this one cannot read: {type(exc).__name__}: {exc}")
    return report


class _Failed(Exception):
    """The first check of a package that failed (caught by :func:`verify_package`)."""

    def __init__(self, problem: str, event_id: str | None = None) -> None:
        super().__init__(problem)
        self.problem, self.event_id = problem, event_id


def _check_signed_list(folder: _Folder) -> None:
    """The signed list of a :data:`FORMAT` bag's tag files names each of :data:`SIGNED_TAGS`
    with the SHA-256 the file has (a bag re-hashed after a change fails here)."""
    try:
        listed = read_manifest(SIGNED, folder.files[SIGNED])
    except BagError as exc:
        raise _Failed(str(exc)) from None
    for name in SIGNED_TAGS:
        if name not in listed:
            raise _Failed(f"{SIGNED} does not list {name}: the signature does not cover it")
        if hashlib.sha256(folder.files[name]).hexdigest() != listed[name]:
            raise _Failed(f"{name}: its SHA-256 is not the one the signed {SIGNED} lists (altered after signing)")


def _check_bag(
    folder: _Folder, report: PackageReport, public_key: bytes | None, keys: list[dict[str, Any]] | None = None
) -> None:
    """The bag's completeness and fixity (as ``bagit.py --validate``), then its signature, then
    that it was made within its key's validity period (``keys``: the store's; None: not checked)."""
    labels = bag_info(folder.files)
    current = labels.get("Dealtrail-Format", FORMAT) != BAG_FORMAT_2
    try:
        check_bag(folder.files, every_tag_listed=current)  # every file in a manifest (issue 47)
    except BagError as exc:
        raise _Failed(f"the BagIt check fails: {exc}") from None
    for name in FILES:
        if f"data/{name}" not in folder.files:
            raise _Failed(f"the bag's payload has no data/{name} (removed, with its line of manifest-sha256.txt)")
    if current and CHECKER not in folder.files:
        raise _Failed(f"the bag has no {CHECKER} (removed, with its line of {TAGMANIFEST})")
    claimed = labels.get("Dealtrail-Signing-Key")
    signed, sig_name = (SIGNED, SIGNED_SIGNATURE) if current else (TAGMANIFEST, SIGNATURE_2)
    signature, pem = folder.files.get(sig_name), folder.files.get(PUBLIC_KEY)
    if signature is None or pem is None or signed not in folder.files:
        if claimed is not None or public_key is not None:
            raise _Failed(f"the package is not signed: {sig_name} or {PUBLIC_KEY} is missing")
        report.notes.append("WARNING: the package is not signed (no signing key was set when it was made)")
        return
    try:
        kid = key_id(pem)
        ok = verify_signature(pem, folder.files[signed], signature)
    except SigningError as exc:
        raise _Failed(f"{PUBLIC_KEY}: {exc}") from None
    if not ok:
        raise _Failed(f"{sig_name} is not a signature of {signed} by the key in {PUBLIC_KEY}")
    if current:
        _check_signed_list(folder)
    if claimed != kid:
        raise _Failed(f"bag-info.txt names signing key {claimed}, the package carries key {kid}")
    if public_key is not None and key_id(public_key) != kid:
        raise _Failed(f"the package is signed by key {kid}, not by the registered key {key_id(public_key)}")
    report.notes.append(
        f"the bag is complete and every file matches its SHA-256; signed by key {kid}"
        + (
            " (the registered key given)"
            if public_key is not None
            else " (compare it with the property's registered key)"
        )
    )
    report.notes.append(_key_validity(labels.get("Bagging-Time"), kid, keys))


def _key_validity(stated: str | None, kid: str, keys: list[dict[str, Any]] | None) -> str:
    """The note that the package was made within key ``kid``'s validity period (``stated``: its
    ``Bagging-Time``); raises :class:`_Failed` naming the key and the dates when it was not."""
    if keys is None:
        return "the signing key's validity period was NOT checked (no store given: verify-package --store)"
    try:
        made = datetime.fromisoformat(str(stated))
    except ValueError:
        raise _Failed(
            f"bag-info.txt states no readable Bagging-Time ({stated!r}): the key's validity cannot be checked"
        ) from None
    if made.tzinfo is None:
        raise _Failed(f"bag-info.txt's Bagging-Time {stated} has no offset: the key's validity cannot be checked")
    problem = validity_problem(keys, kid, made)
    if problem is not None:
        raise _Failed(f"the package was {problem}")
    return f"made at {made.astimezone(UTC).isoformat()}, within key {kid}'s validity period in the store"


def _verify(
    folder: _Folder,
    report: PackageReport,
    public_key: bytes | None = None,
    keys: list[dict[str, Any]] | None = None,
) -> None:
    """The checks of :func:`verify_package`, in the README's order; raises :class:`_Failed` at the first that fails."""
    if folder.bag:
        _check_bag(folder, report, public_key, keys)
    elif public_key is not None:
        raise _Failed("the package is not signed: it is no BagIt bag (made by dealtrail 0.2.0)")
    manifest = _json(folder, "manifest.json")
    expected = BAG_FORMATS if folder.bag else (LEGACY_FORMAT,)
    if not isinstance(manifest, dict) or manifest.get("format") not in expected:
        if not folder.bag and isinstance(manifest, dict) and manifest.get("format") in BAG_FORMATS:
            raise PackageRefused(f"a {FORMAT} package is a BagIt bag: this one has no bagit.txt (refused)")
        raise EvidenceError(f"manifest.json is not a {' or '.join(expected)} manifest")
    revision = manifest.get("rulebook_revision")
    if revision != RULEBOOK_REVISION:
        report.notes.append(
            f"WARNING: the package was judged under rulebook revision {revision} (engine "
            f"{manifest.get('engine_version')}); this engine applies revision {RULEBOOK_REVISION} "
            f"({ENGINE_VERSION}): the re-derivation uses this engine's rules"
        )
    table_id = str(manifest.get("table_id"))
    digest = _json(folder, "digest.json").get("tables", {}).get(table_id)
    if not isinstance(digest, dict):
        raise EvidenceError(f"digest.json holds no head for table {table_id}")
    events: dict[int, tuple[str, Any]] = {}
    for n, line in _jsonl(folder, "events.jsonl"):
        events[n] = (line, None)

    # 1-2: the packaged events against their hashes and links, the links up to the digest head
    anchor = manifest.get("anchor")
    head_seq, head_hash = (int(anchor["seq"]), anchor["hash"]) if anchor else (0, None)
    seen: dict[int, str] = {}
    head_before: dict[int, tuple[int, str | None]] = {}  # events.jsonl line -> chain head before it
    used: set[int] = set()
    for _, raw in _jsonl(folder, "chain.jsonl"):
        try:
            link = json.loads(raw)
            seq, event_id, prev, own = int(link["seq"]), str(link["event_id"]), link.get("prev_hash"), link["hash"]
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            raise _Failed(f"a line of chain.jsonl is not a chain link: {raw[:80]!r}") from None
        line_no = link.get("line")
        if line_no is not None:
            if line_no not in events or line_no in used:
                raise _Failed(f"the chain link of event {event_id} names no event line {line_no}", event_id)
            used.add(line_no)
            head_before[line_no] = (head_seq, head_hash)
            try:
                event = decode(events[line_no][0])
            except DecodeError as exc:
                raise _Failed(
                    f"event {event_id} (seq {seq}) no longer decodes ({exc.reason}): altered", event_id
                ) from None
            if event.event_id != event_id or event.seq != seq:
                raise _Failed(
                    f"line {line_no} of events.jsonl holds event {event.event_id} (seq {event.seq}), "
                    f"its chain link says {event_id} (seq {seq})",
                    event_id,
                )
            if event.hash is None or chain_hash(event) != event.hash:
                raise _Failed(f"event {event_id} (seq {seq}): content does not match its hash (altered)", event_id)
            if event.hash != own or event.prev_hash != prev:
                raise _Failed(f"event {event_id} (seq {seq}): its hashes differ from its chain link", event_id)
            events[line_no] = (events[line_no][0], event)
        if head_hash is not None and prev != head_hash:
            raise _Failed(
                f"the chain is broken at seq {seq}, event {event_id}: prev_hash is not the hash of the link before it",
                event_id,
            )
        if seq > head_seq or head_hash is None:
            head_seq, head_hash = seq, own
            seen[seq] = own
    unlinked = sorted(set(events) - used)
    if unlinked:
        raise _Failed(f"line {unlinked[0]} of events.jsonl has no chain link: it is not part of the trail")
    if seen.get(int(digest["head_seq"])) != digest["head_hash"]:
        raise _Failed(
            f"the chain links do not lead to the digest head (seq {digest['head_seq']}, {digest['head_hash']})"
        )
    report.notes.append(
        f"{len(events)} events match their hashes; {manifest.get('chain_links')} chain links lead to the digest head "
        f"at seq {digest['head_seq']} ({manifest.get('hash_only_links')} carried as hashes only)"
    )

    # 3-4: the start states anchored in the chain, and the finding re-derived by the engine
    bounds = manifest.get("plausibility")
    limits = (
        None
        if bounds is None
        else Plausibility(int(bounds["max_seq_jump"]), timedelta(seconds=float(bounds["max_clock_skew_seconds"])))
    )
    starts = _json(folder, "start-states.json")
    by_line = {int(s["first_line"]): s for s in starts}
    if 1 in events and 1 not in by_line:
        raise _Failed("start-states.json has no state for the first packaged event")
    derived: list[Finding] = []
    state: TableState | None = None
    for line_no in sorted(events):
        _, event = events[line_no]
        if line_no in by_line:
            start = by_line[line_no]
            if _state_sha256(start) != start.get("state_sha256"):
                raise _Failed(f"the engine state before line {line_no} does not match its SHA-256", event.event_id)
            try:
                state = load_state(json.dumps(start["state"])) if start["state"] is not None else None
            except ValueError as exc:
                raise _Failed(
                    f"the engine state before event {event.event_id} does not load in this engine "
                    f"({ENGINE_VERSION}): {type(exc).__name__}",
                    event.event_id,
                ) from None
            anchor_hash = head_before[line_no][1]
            if (state.last_hash if state is not None else None) != anchor_hash:
                raise _Failed(
                    f"the engine state before event {event.event_id} does not end at the chain's head before it",
                    event.event_id,
                )
        try:
            state, found = apply(state, event, limits=limits)
        except EventRejected as exc:
            report.notes.append(f"event {event.event_id} refused by the engine ({exc.reason}), as in the audit")
            continue
        derived.extend(found)
    doc = _json(folder, "finding.json")
    finding_id = manifest.get("finding_id")
    for key in ("finding_id", "table_id", "round_id", "rule_id"):
        if doc.get(key) != manifest.get(key):
            raise _Failed(f"finding.json's {key} ({doc.get(key)!r}) is not the manifest's ({manifest.get(key)!r})")
    stored_revisions = [Finding.model_validate(rec) for rec in doc.get("revisions", [])]
    if not stored_revisions:
        raise _Failed("finding.json holds no revision of the finding")
    mine = {(f.finding_id, f.revision): f for f in derived if f.finding_id == finding_id}
    extra = (
        f" (the package was judged under rulebook revision {revision}, this engine applies {RULEBOOK_REVISION})"
        if revision != RULEBOOK_REVISION
        else ""
    )
    for stored in stored_revisions:
        again = mine.get((stored.finding_id, stored.revision))
        if again is None:
            raise _Failed(
                f"revision {stored.revision} ({stored.status.value}) of finding {stored.finding_id} is not raised "
                f"when the engine runs over the packaged events{extra}",
                stored.trigger_event_id,
            )
        field_name = _first_difference(stored, again)
        if field_name is not None:
            raise _Failed(
                f"revision {stored.revision} ({stored.status.value}) of finding {stored.finding_id} is raised "
                f"differently when the engine runs over the packaged events: its {field_name} in finding.json is "
                f"{_shown(getattr(stored, field_name))}, the engine's is {_shown(getattr(again, field_name))}{extra}",
                stored.trigger_event_id,
            )
    citation = stored_revisions[0].citation
    if doc.get("citation") != citation:
        raise _Failed(f"finding.json's citation ({doc.get('citation')!r}) is not its revisions' ({citation!r})")
    report.notes.append(
        f"the engine ({ENGINE_VERSION}) raises all {len(stored_revisions)} revision(s) of finding "
        f"{finding_id} ({manifest.get('rule_id')}) again from the packaged events, every field as in finding.json"
    )
    report.notes.append(NOT_PROVEN)


def _state_sha256(start: dict[str, Any]) -> str:
    """A packaged start state's SHA-256 in the encoding its ``hash_version`` names: RFC 8785 (2),
    or, without one (packages of 0.2.0), ``json.dumps(state, sort_keys=True)``."""
    if start.get("hash_version") == JCS:
        return canonical_sha256(start["state"])
    return hashlib.sha256(json.dumps(start["state"], sort_keys=True).encode()).hexdigest()


NOT_PROVEN = (
    "not proven by the chain: reviews.json (the casino's review record: who acknowledged, assigned, disposed, "
    "approved, notes, video references); start-states.json (the engine's summary of earlier events, anchored in "
    "the chain by its last hash only, its content not re-derived); manifest.json's other fields and README.md "
    "(descriptions); that the events were true when first recorded"
)
"""What :func:`verify_package` does not prove, said with every report that passes (and in the
package's README and docs/integrity.md)."""

_UNCOMPARED = frozenset({"rulebook_revision"})
"""Finding fields not compared with the engine's: the revision the audit applied is the
manifest's (compared with this engine's, a warning when they differ); stores of revision 1 do
not keep it per finding."""


def _first_difference(stored: Finding, again: Finding) -> str | None:
    """The first field (in the model's order) in which a stored revision differs from the engine's, or None."""
    for name in Finding.model_fields:
        if name not in _UNCOMPARED and getattr(stored, name) != getattr(again, name):
            return name
    return None


def _shown(value: Any) -> str:
    """A field's value for a one-line message (long texts cut)."""
    text = repr(value.value if hasattr(value, "value") else value)
    return text if len(text) <= 120 else text[:117] + "..."
