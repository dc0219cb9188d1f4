"""A self-describing CoS index on disk: the store, three Chroma collections, a manifest.

``DIR/manifest.json`` names the embedder and the CoS config; ``DIR/cos.sqlite`` is the
durable store (the truth); Chroma's own files (a ``PersistentClient`` on ``DIR``, so
``chromadb.PersistentClient(path=DIR)`` in LlamaIndex or LangChain code opens the same
collections) hold three cosine-space collections:
``cos_summaries`` (one vector per document: its current summary), ``cos_chunks``
(full-text chunks, each with ``doc_id``) and ``cos_answers`` (one vector per verified
answer: its question, :mod:`~cos_integrations.storage.answers`). With ``chroma_url``
the collections live in a Chroma server instead (``chromadb.HttpClient``); the store stays
in ``DIR``.

Writes go store first, Chroma second; every Chroma write for a document is
delete-then-add (Chroma's upsert merges metadata) and is followed by a mark in the store.
A crash between the two is repaired by :meth:`CoSIndex.repair`, which every ingest runs.

Examples:
    >>> from cos_integrations.serving.index import CoSIndex
    >>> from cos_integrations.embedded.embeddings import HashingEmbedder
    >>> index = CoSIndex("/tmp/doctest-index", embedder=HashingEmbedder())  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

from cos_integrations.defaults import DEFAULT_THRESHOLD
from cos_integrations.embedded.embeddings import Embedder
from cos_integrations.ingest import (
    IngestReport,
    chunk_metadata,
    flatten_metadata,
    summarize_new,
    summary_metadata,
)
from cos_integrations.loaders import SourceDocument
from cos_integrations.serving.hit_rule import HitRule
from cos_integrations.storage.answers import AnswerEntry
from cos_integrations.storage.db import strip_password
from cos_integrations.storage.store import SummaryStore
from cos_integrations.summarize.config import CoSConfig
from cos_integrations.summarize.engine import ChainOfSummaries
from cos_integrations.text import chunk_text
from cos_integrations.version import __version__

__all__ = [
    "SUMMARIES",
    "CHUNKS",
    "ANSWERS",
    "chunk_position",
    "CoSIndex",
    "IngestReport",
    "SearchHit",
    "flatten_metadata",
    "read_manifest",
    "read_racing_writes",
]


def chunk_position(hit: SearchHit) -> tuple[str, int]:
    """Where a source chunk stands in its document (chunk ids are ``DOC::chunk::N``): its
    document and number, for putting chunks back in document order.

    Examples:
        >>> chunk_position(SearchHit("lease::chunk::3", "lease", "", 0.5, {}, "chunk"))
        ('lease', 3)
    """
    doc, _, n = hit.id.rpartition("::chunk::")
    return (doc, int(n)) if n.isdigit() else (hit.doc_id, 0)


def _answer_id(entry_id: int) -> str:
    return f"answer::{entry_id}"


def _doc_filter(doc_ids: Sequence[str]) -> dict[str, Any]:
    """A Chroma ``where`` on one or several documents."""
    if len(doc_ids) == 1:
        return {"doc_id": doc_ids[0]}
    return {"doc_id": {"$in": list(doc_ids)}}


def _kill_point(name: str) -> None:
    """Fault injection for the crash-and-resume suite: SIGKILL this process at ``name``
    when ``COS_FAULT_KILL_AT`` names it. A no-op otherwise."""
    if os.environ.get("COS_FAULT_KILL_AT") == name:
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


log = logging.getLogger(__name__)
T = TypeVar("T")

SUMMARIES = "cos_summaries"
CHUNKS = "cos_chunks"
ANSWERS = "cos_answers"
MANIFEST = "manifest.json"
_COSINE = {"hnsw": {"space": "cosine"}}


def read_racing_writes(read: Callable[..., T], *args: Any, attempts: int = 4, **kwargs: Any) -> T:
    """``read(*args, **kwargs)`` on a Chroma collection, asked again (up to ``attempts``
    times, 50 ms apart) when it raced a publish: a Chroma server that deletes a vector
    between a query's index search and its record fetch answers "Error finding id"
    (seen under the concurrent-query test, queries while versions are published), and one
    queried while another process's first writes to a collection are not yet on disk
    answers "Error creating hnsw segment reader: Nothing found on disk" (chroma-core/chroma
    #4212; seen with four refine workers keeping verified answers). Any other error is
    raised at once."""
    for attempt in range(attempts):
        try:
            return read(*args, **kwargs)
        except Exception as exc:  # chromadb.errors.InternalError, by message
            message = str(exc).lower()
            racing = "error finding id" in message or "nothing found on disk" in message
            if not racing or attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


def read_manifest(persist_dir: str | Path) -> dict | None:
    """The manifest of the index in ``persist_dir`` (``None``: no index there yet, or a
    manifest that cannot be read): what an adapter reads to know, e.g., which embedder
    wrote the vectors, without opening the index.

    Examples:
        >>> read_manifest("/no/such/index") is None
        True
    """
    try:
        data = json.loads((Path(persist_dir) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass
class SearchHit:
    """One retrieved item: a summary or a source chunk, with cosine similarity ``score``.

    Examples:
        >>> hit = SearchHit("lease.md::chunk-0", "lease.md", "Rent is due on the 1st.", 0.86,
        ...                 {"cos_kind": "chunk"}, "chunk")
        >>> hit.doc_id, hit.kind
        ('lease.md', 'chunk')
    """

    id: str
    doc_id: str
    text: str
    score: float
    metadata: dict[str, Any]
    kind: str  # "summary" or "chunk"


class CoSIndex:
    """Open or create an index directory. See the module docstring for its layout.

    Examples:
        >>> index = CoSIndex("./index", embedder=LocalEmbedder())            # doctest: +SKIP
        >>> report = await index.aingest(docs, ChainOfSummaries(llm))         # doctest: +SKIP
        >>> index.search_summaries("When is rent due?", k=3)                  # doctest: +SKIP
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        embedder: Embedder | None = None,
        config: CoSConfig | None = None,
        chroma_url: str | None = None,
        chunk_words: int = 160,
        create: bool = True,
        store_url: str | None = None,
    ) -> None:
        self.path = Path(path)
        manifest_path = self.path / MANIFEST
        existing = json.loads(manifest_path.read_text()) if manifest_path.is_file() else None
        if existing is None and not create:
            raise FileNotFoundError(
                f"{self.path} is not a CoS index (no {MANIFEST}); create it with `cos ingest`"
            )
        if embedder is None:
            from cos_integrations.embedded.embeddings import HashingEmbedder, LocalEmbedder

            name = (existing or {}).get("embedding", {}).get("name", LocalEmbedder.name)
            embedder = (
                HashingEmbedder(int(name.rsplit("-", 1)[1]))
                if name.startswith("hashing-bow-")
                else LocalEmbedder()
            )
        if existing and existing["embedding"]["name"] != embedder.name:
            raise ValueError(
                f"{self.path} was built with the embedder {existing['embedding']['name']!r}; "
                f"it cannot be searched with {embedder.name!r}"
            )
        self.embedder = embedder
        if config is None and existing and existing.get("config"):
            config = CoSConfig.model_validate(existing["config"])
        self.config = config or CoSConfig.shipped()
        self.chroma_url = chroma_url or (existing or {}).get("chroma", {}).get("url")
        self.chunk_words = int((existing or {}).get("chunk_words", chunk_words))
        self._threshold: dict | None = (existing or {}).get("threshold")
        recorded_rule = (existing or {}).get("hit_rule")
        self._hit_rule = HitRule.from_record(recorded_rule) if recorded_rule else None
        # how `cos ingest` reads Markdown and HTML pages into this index (sections or whole
        # pages; None: not recorded, an index made before 0.2)
        self.page_sections: bool | None = (existing or {}).get("page_sections")
        if existing is None:
            # a new index records the rule it is built with (the default, whose judge
            # follows the retriever's model: HitRule.for_model), so a later default cannot
            # change how it answers
            self._hit_rule = HitRule()
        self.path.mkdir(parents=True, exist_ok=True)
        # the store: an explicit URL, else the manifest's (a server URL, recorded without
        # its password), else the SQLite file in this directory. The manifest keeps what it
        # recorded when the index was made (or by use_store): opening it once with another
        # store_url does not repoint it.
        recorded = (existing or {}).get("store", "cos.sqlite")
        if store_url is None and "://" in str(recorded):
            store_url = recorded
        if existing is None:
            recorded = strip_password(store_url) if store_url else "cos.sqlite"
        self._recorded_store = recorded
        self.store_url = store_url
        self.store = SummaryStore(
            store_url or (self.path / "cos.sqlite"), create=create or existing is None
        )
        self.client = self._client()
        self.summaries = self.client.get_or_create_collection(
            SUMMARIES, configuration=_COSINE, embedding_function=None
        )
        self.chunks = self.client.get_or_create_collection(
            CHUNKS, configuration=_COSINE, embedding_function=None
        )
        self.answers = self.client.get_or_create_collection(
            ANSWERS, configuration=_COSINE, embedding_function=None
        )
        self._write_manifest()

    def _client(self) -> Any:
        import chromadb
        from chromadb.config import Settings

        # Never phone home, for library users too: Chroma reads this when Settings are made,
        # so clients the application opens later get the same settings (an explicit
        # ANONYMIZED_TELEMETRY in the environment still wins).
        os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
        settings = Settings()

        def make(settings: Any) -> Any:
            if self.chroma_url:
                url = urlparse(self.chroma_url)
                return chromadb.HttpClient(
                    host=url.hostname or "127.0.0.1",
                    port=url.port or (443 if url.scheme == "https" else 8000),
                    ssl=url.scheme == "https",
                    settings=settings,
                )
            return chromadb.PersistentClient(path=str(self.path), settings=settings)

        try:
            return make(settings)
        except ValueError as exc:
            if "different settings" not in str(exc):
                raise
            # the application opened this path before us with telemetry the other way:
            # Chroma allows one set of settings per path and process, so share theirs
            flipped = Settings(anonymized_telemetry=not settings.anonymized_telemetry)
            return make(flipped)

    def use_store(self, url: str) -> None:
        """Point this index at another store (e.g. after ``cos migrate-store``) and record it
        in the manifest, without its password."""
        store = SummaryStore(url, create=False)
        self.store.close()
        self.store, self.store_url = store, url
        self._recorded_store = strip_password(url)
        self._write_manifest()

    def _write_manifest(self) -> None:
        manifest = {
            "format": "cos-index",
            "format_version": 1,
            "created_by": f"cos-integrations {__version__}",
            "embedding": {"name": self.embedder.name, "dim": self.embedder.dim},
            "config": self.config.model_dump(mode="json"),
            "config_hash": self.config.config_hash(),
            "store": self._recorded_store,
            "chroma": {"url": self.chroma_url} if self.chroma_url else {"path": "."},
            "collections": {"summaries": SUMMARIES, "chunks": CHUNKS},
            "chunk_words": self.chunk_words,
        }
        if self._threshold:
            manifest["threshold"] = self._threshold
        if self._hit_rule is not None:
            manifest["hit_rule"] = self._hit_rule.model_dump(mode="json")
        if self.page_sections is not None:
            manifest["page_sections"] = self.page_sections
        text = json.dumps(manifest, indent=2)
        target = self.path / MANIFEST
        try:
            if target.read_text() == text:
                return  # opened again, nothing changed: no write (and no race to write)
        except OSError:
            pass
        # one temporary file per writer: processes opening the same index at once (refine
        # workers) each replace the manifest whole, never one another's half-written file
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=MANIFEST + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.chmod(tmp, 0o644)  # as a plain write would leave it (mkstemp makes it 0600)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @property
    def manifest(self) -> dict:
        """The index's manifest (embedder, config, store URL without its password, ...)."""
        found = read_manifest(self.path)
        if found is None:
            raise FileNotFoundError(f"{self.path / MANIFEST}: no manifest")
        return found

    # ------------------------------------------------------------------ hit rule
    @property
    def hit_rule(self) -> HitRule:
        """The hit rule this index answers with when a retriever is given none: the one
        recorded in its manifest (the default ``HitRule()`` when the index was made, or
        :meth:`set_hit_rule`'s), else (an index made before 0.2) ``HitRule()``."""
        return self._hit_rule if self._hit_rule is not None else HitRule()

    def set_hit_rule(self, rule: HitRule, *, recalibrate: bool = True) -> None:
        """Record ``rule`` in the manifest: retrievers opened on this index without a rule
        of their own answer with it. A new ``calibration_quantile`` recalibrates the
        threshold (``recalibrate``), so the index answers the way it was calibrated.

        Examples:
            >>> index.set_hit_rule(HitRule(judge="llm"))   # doctest: +SKIP
        """
        old = self.hit_rule
        self._hit_rule = rule
        self._write_manifest()
        if recalibrate and rule.calibration_quantile != old.calibration_quantile:
            self.calibrate_threshold()

    def record_page_sections(self, sections: bool) -> None:
        """Record how Markdown and HTML pages are read into this index (one document a
        section, or a page), so a later ``cos ingest`` without ``--sections`` /
        ``--whole-pages`` reads them the same way and retires nothing for it."""
        if self.page_sections != sections:
            self.page_sections = sections
            self._write_manifest()

    # ------------------------------------------------------------------ threshold
    @property
    def threshold(self) -> float:
        """The summary similarity a query needs before the judge is asked: this index's
        calibrated value (see :meth:`calibrate_threshold`), else ``DEFAULT_THRESHOLD`` (0.80,
        tuned to e5)."""
        if self._threshold and self._threshold.get("value") is not None:
            return float(self._threshold["value"])
        return DEFAULT_THRESHOLD

    def calibrate_threshold(
        self,
        questions: Sequence[tuple[str, str]] | None = None,
        *,
        quantile: float | None = None,
        min_questions: int = 10,
    ) -> float | None:
        """Set this index's threshold from questions it knows the answer document of.

        ``questions`` are ``(doc_id, question)`` pairs (default: the questions of the
        question banks that people asked: human questions and misses that refinement
        taught; synthetic questions are left out, they sit closer to their summary than
        users' queries do: in the quick start their 25th percentile was 0.848 with e5,
        against 0.813 for SQuAD's human questions, and a refined summary was then never
        asked again). The threshold is the ``quantile`` of their cosine similarity to their
        own document's current summary (default: the hit rule's
        ``calibration_quantile``, 0.25), so about three in four queries like them reach the
        judge, whatever the embedder's scale (e5's scores sit near 0.8, a bag-of-words
        embedder's near 0.2). Stored in the manifest; an explicit ``threshold=`` on a
        retriever still wins. Returns the value, or ``None`` (nothing changed) with fewer
        than ``min_questions`` usable questions.

        Examples:
            >>> index.calibrate_threshold([("lease", "When is rent due?"), ...])  # doctest: +SKIP
            0.81
        """
        if quantile is None:
            quantile = self.hit_rule.calibration_quantile
        if questions is None:
            questions = [
                (d.doc_id, q.question)
                for d in self.store.documents()
                for q in self.store.questions(d.doc_id)
                if q.origin != "synthetic"
            ]
        summaries: dict[str, list[float]] = {}
        sims: list[float] = []
        for doc_id, question in questions:
            if doc_id not in summaries:
                current = self.store.current_summary(doc_id)
                if current is None:
                    continue
                summaries[doc_id] = self.embedder.embed_documents([current.text])[0]
            q = self.embedder.embed_query(question)
            sims.append(sum(a * b for a, b in zip(q, summaries[doc_id], strict=True)))
        if len(sims) < min_questions:
            return None
        sims.sort()
        # rounded down, so the questions at the quantile itself still reach it
        value = math.floor(sims[min(len(sims) - 1, int(quantile * len(sims)))] * 1e4) / 1e4
        self._threshold = {"value": value, "questions": len(sims), "quantile": quantile}
        self._write_manifest()
        log.info(
            "index %s: threshold calibrated to %.3f from %d questions", self.path, value, len(sims)
        )
        return value

    # ------------------------------------------------------------------ writing
    def sync_document(self, doc_id: str) -> None:
        """Make Chroma match the store for one document (idempotent, safe across processes).

        Embeddings are computed first, outside any lock; the writes then happen under the
        store's write lock after checking that the version is still current, so two workers
        never interleave the writes of different versions.
        """
        for _ in range(5):
            plan = self._plan_sync(doc_id)
            with self.store.sync_lock():
                doc = self.store.get_document(doc_id)
                live = doc is not None and doc.status != "retired"
                now = (doc.content_hash, doc.current_version) if live else None
                if now != plan["state"]:
                    continue  # a newer version landed meanwhile: plan again
                self._apply_sync(doc_id, plan)
                return
        raise RuntimeError(f"document {doc_id} kept changing while being indexed")

    def _plan_sync(self, doc_id: str) -> dict[str, Any]:
        doc = self.store.get_document(doc_id)
        if doc is not None and doc.status == "retired":
            doc = None  # no vectors for a retired document; its records stay in the store
        plan: dict[str, Any] = {"state": None, "doc": doc, "chunks": None, "summary": None}
        if doc is None:
            return plan
        plan["state"] = (doc.content_hash, doc.current_version)
        if doc.indexed_hash != doc.content_hash or not self._has_chunks(doc_id):
            chunks = chunk_text(doc.text, words=self.chunk_words, overlap=self.chunk_words // 5)
            plan["chunks"] = (chunks, self.embedder.embed_documents(chunks) if chunks else [])
        current = self.store.current_summary(doc_id)
        if current is not None:
            plan["summary"] = (current, self.embedder.embed_documents([current.text])[0])
        return plan

    def sync_documents(self, doc_ids: Sequence[str], *, batch: int = 512) -> None:
        """:meth:`sync_document` for many documents, ``batch`` at a time under one lock, with
        one Chroma write per collection a batch instead of several a document (a bulk load
        of 100,000 documents: Chroma's per-call commit was 56 ms a document). A document
        that changed while its batch was being embedded is synced again on its own.

        Examples:
            >>> index.sync_documents(index.store.needs_index())   # doctest: +SKIP
        """
        ids = list(dict.fromkeys(doc_ids))
        for start in range(0, len(ids), batch):
            plans = {d: self._plan_sync(d) for d in ids[start : start + batch]}
            late = []
            with self.store.sync_lock():
                ready = {}
                for doc_id, plan in plans.items():
                    doc = self.store.get_document(doc_id)
                    live = doc is not None and doc.status != "retired"
                    now = (doc.content_hash, doc.current_version) if live else None
                    if now == plan["state"]:
                        ready[doc_id] = plan
                    else:
                        late.append(doc_id)
                self._apply_sync_many(ready)
            for doc_id in late:
                self.sync_document(doc_id)

    def _apply_sync(self, doc_id: str, plan: dict[str, Any]) -> None:
        self._apply_sync_many({doc_id: plan})

    def _apply_sync_many(self, plans: dict[str, dict[str, Any]], chunk_batch: int = 256) -> None:
        if not plans:
            return
        gone = [d for d, p in plans.items() if p["doc"] is None]
        if gone:
            self.summaries.delete(where=_doc_filter(gone))
            self.chunks.delete(where=_doc_filter(gone))
            self.answers.delete(where=_doc_filter(gone))
        live = {d: p for d, p in plans.items() if p["doc"] is not None}
        if not live:
            return
        rechunk = [d for d, p in live.items() if p["chunks"] is not None]
        if rechunk:
            # a new text: its verified answers went with the old one (the store dropped
            # them); their vectors go too
            self._drop_answer_vectors(rechunk)
            self.chunks.delete(where=_doc_filter(rechunk))
            rows = [
                (f"{d}::chunk::{i}", vector, text, chunk_metadata(live[d]["doc"], i))
                for d in rechunk
                for i, (text, vector) in enumerate(zip(*live[d]["chunks"], strict=True))
            ]
            for start in range(0, len(rows), chunk_batch):
                if start:
                    _kill_point("during_chunk_write")
                part = rows[start : start + chunk_batch]
                self.chunks.add(
                    ids=[r[0] for r in part],
                    embeddings=[r[1] for r in part],
                    documents=[r[2] for r in part],
                    metadatas=[flatten_metadata(r[3]) for r in part],
                )
                if len(rows) <= chunk_batch:
                    _kill_point("during_chunk_write")
        # Add the new versions' vectors first, then drop the older ones: a concurrent query
        # never sees a document without a summary vector (at worst two, de-duplicated).
        keep: dict[str, str] = {}
        new = []
        for doc_id, plan in live.items():
            if plan["summary"] is not None:
                current, vector = plan["summary"]
                keep[doc_id] = f"{doc_id}::summary::v{current.version}"
                meta = summary_metadata(plan["doc"], current)
                # how many source chunks it has: the hit path reads them by id
                meta["cos_chunks"] = self._chunk_count(plan)
                meta = flatten_metadata(meta)
                new.append((keep[doc_id], vector, current.text, meta))
        if new:
            self.summaries.upsert(
                ids=[r[0] for r in new],
                embeddings=[r[1] for r in new],
                documents=[r[2] for r in new],
                metadatas=[r[3] for r in new],
            )
        existing = self.summaries.get(where=_doc_filter(list(live)), include=["metadatas"])
        kept = set(keep.values())
        stale = [
            i
            for i, m in zip(existing["ids"], existing["metadatas"], strict=True)
            if i not in kept and (m or {}).get("cos_kind") != "chunk"
        ]
        if stale:
            self.summaries.delete(ids=stale)
        for doc_id, plan in live.items():
            current = plan["summary"][0] if plan["summary"] is not None else None
            self.store.mark_indexed(
                doc_id, current.version if current else None, plan["doc"].content_hash
            )

    def _chunk_count(self, plan: dict[str, Any]) -> int:
        if plan["chunks"] is not None:
            return len(plan["chunks"][0])
        doc = plan["doc"]
        return len(chunk_text(doc.text, words=self.chunk_words, overlap=self.chunk_words // 5))

    def _has_chunks(self, doc_id: str) -> bool:
        return bool(self.chunks.get(where={"doc_id": doc_id}, limit=1, include=[])["ids"])

    def _drop_answer_vectors(self, doc_ids: list[str]) -> None:
        """Delete the answer vectors of ``doc_ids`` that the store no longer holds."""
        got = self.answers.get(where=_doc_filter(doc_ids), include=[])
        keep = {_answer_id(e.id) for d in doc_ids for e in self.store.answers(d)}
        stale = [i for i in got["ids"] if i not in keep]
        if stale:
            self.answers.delete(ids=stale)

    def add_answer(self, entry: AnswerEntry, embedding: list[float] | None = None) -> None:
        """Index a verified answer's question (``embedding``: its vector, when already
        made), so a reworded question finds it (:meth:`search_answers`)."""
        emb = embedding if embedding is not None else self.embedder.embed_query(entry.question)
        meta = {"doc_id": entry.doc_id, "cos_kind": "answer", "cos_entry": entry.id}
        self.answers.upsert(
            ids=[_answer_id(entry.id)],
            embeddings=[emb],
            documents=[entry.question],
            metadatas=[meta],
        )

    def search_answers(self, embedding: list[float], n: int = 4) -> list[tuple[AnswerEntry, float]]:
        """The ``n`` verified answers whose questions are closest to ``embedding`` (cosine
        similarity), best first: only entries verified on their document's current text.
        Vectors of entries the store no longer holds (replaced, or their text changed) are
        deleted as they are met."""
        res = self._query(self.answers, embedding, n, None, "answer")
        ids = {h.id: int(h.metadata.get("cos_entry", -1)) for h in res}
        entries = self.store.answers_by_id(list(ids.values()))
        gone = [h.id for h in res if ids[h.id] not in entries]
        if gone:
            # replaced or stale: unless the entry is merely stale in the store (a text
            # that changed back), its vector is dead weight
            alive = {_answer_id(i) for i in self.store.answer_ids([ids[g] for g in gone])}
            dead = [g for g in gone if g not in alive]
            if dead:
                self.answers.delete(ids=dead)
        return [(entries[ids[h.id]], h.score) for h in res if ids[h.id] in entries]

    def repair(self) -> list[str]:
        """Re-sync every document whose vectors are behind the store (after a crash)."""
        stale = self.store.needs_index()
        if stale:
            log.info("repairing the vectors of %d documents: %s", len(stale), stale[:5])
        self.sync_documents(stale)
        return stale

    def retire_document(self, doc_id: str) -> bool:
        """The document's source is gone: drop its vectors, keep its history in the store
        (:meth:`SummaryStore.retire_document`). Returns False when there is no such document.

        Examples:
            >>> index.retire_document("docs/old-page.md#intro")   # doctest: +SKIP
            True
        """
        if not self.store.retire_document(doc_id):
            return False
        self.sync_document(doc_id)
        return True

    def retire_missing(self, prefixes: Sequence[str], present: Sequence[str]) -> list[str]:
        """Retire the documents whose id starts with one of ``prefixes`` (the folders just
        ingested, ``"docs/"``) and that are not in ``present`` (what the folders hold now):
        a re-crawl's removed pages and sections. Returns their ids."""
        keep = set(present)
        gone = [
            d.doc_id
            for d in self.store.documents()
            if d.status != "retired"
            and d.doc_id not in keep
            and any(d.doc_id.startswith(p) for p in prefixes)
        ]
        for doc_id in gone:
            self.retire_document(doc_id)
        return gone

    def delete_document(self, doc_id: str) -> None:
        self.store.delete_document(doc_id)
        self.sync_document(doc_id)

    async def aingest(
        self,
        documents: Sequence[SourceDocument],
        engine: ChainOfSummaries,
        *,
        concurrency: int = 2,
        on_progress: Callable[[str, str], None] | None = None,
    ) -> IngestReport:
        """Summarise new or changed documents and index them; unchanged ones cost nothing.

        Each finished document is stored and indexed at once, so a failure (or a crash)
        later in the run loses nothing already done. ``on_progress(doc_id, outcome)`` is
        called per document with ``summarized``, ``unchanged`` or ``failed``.
        """
        repaired = self.repair()

        def stored(doc_id: str, outcome: str) -> None:
            if outcome == "summarized":
                _kill_point("after_store_commit")
                self.sync_document(doc_id)
                return
            doc = self.store.get_document(doc_id)
            if doc and (
                doc.indexed_version != doc.current_version or doc.indexed_hash != doc.content_hash
            ):
                self.sync_document(doc_id)

        report = await summarize_new(
            self.store,
            documents,
            engine,
            concurrency=concurrency,
            on_progress=on_progress,
            on_stored=stored,
        )
        report.repaired = repaired
        if report.summarized:
            self.calibrate_threshold()  # new summaries: a fresh scale (once 10 are known)
        return report

    # ------------------------------------------------------------------ reading
    def _hits(self, res: dict, kind: str) -> list[SearchHit]:
        out = []
        for id_, doc, meta, dist in zip(
            res["ids"][0],
            res["documents"][0],
            res["metadatas"][0],
            res["distances"][0],
            strict=True,
        ):
            meta = dict(meta or {})
            out.append(
                SearchHit(id_, str(meta.get("doc_id", "")), doc or "", 1.0 - dist, meta, kind)
            )
        return out

    def _rank_scoped(
        self,
        collection,
        emb: list[float],
        k: int,
        *,
        where: dict | None = None,
        ids: list[str] | None = None,
        kind: str = "chunk",
    ) -> list[SearchHit]:
        """Top-``k`` of the entries matching ``where`` (or with these ``ids``) by cosine
        similarity, computed here, as ``kind`` hits."""
        import numpy as np

        got = read_racing_writes(
            collection.get,
            where=where,
            ids=ids,
            include=["documents", "metadatas", "embeddings"],
        )
        if not got["ids"]:
            return []
        m = np.asarray(got["embeddings"], dtype=np.float32)
        q = np.asarray(emb, dtype=np.float32)
        scores = (m @ q) / np.maximum(np.linalg.norm(m, axis=1) * np.linalg.norm(q), 1e-12)
        out = []
        for i in np.argsort(-scores)[:k]:
            meta = dict(got["metadatas"][i] or {})
            text = got["documents"][i] or ""
            doc_id = str(meta.get("doc_id", ""))
            out.append(SearchHit(got["ids"][i], doc_id, text, float(scores[i]), meta, kind))
        return out

    def search_summaries(
        self, query: str, k: int = 4, *, embedding: list[float] | None = None
    ) -> list[SearchHit]:
        """Top-``k`` summaries by cosine similarity (one per document).

        Entries marked ``cos_kind="chunk"`` (a LlamaIndex pipeline with ``emit="both"``
        writes chunks into the same collection) are excluded.
        """
        if k <= 0:
            return []
        emb = embedding or self.embedder.embed_query(query)
        # k + 2: during a version swap a document briefly has two vectors. Unfiltered first:
        # a metadata filter makes Chroma's search several times slower (11.9 ms against
        # 1.5 ms at 2,000 summaries); the filter runs only when chunk entries crowd the top.
        n = k + 2
        raw = self._query(self.summaries, emb, n, None, "summary")
        hits = [h for h in raw if h.metadata.get("cos_kind") != "chunk"]
        if len(hits) < len(raw) and len({h.doc_id for h in hits}) < k:
            hits = self._query(self.summaries, emb, n, {"cos_kind": {"$ne": "chunk"}}, "summary")
        best: dict[str, SearchHit] = {}
        for h in hits:
            if h.doc_id not in best or h.metadata.get("cos_version", 0) > best[
                h.doc_id
            ].metadata.get("cos_version", 0):
                best[h.doc_id] = h
        return sorted(best.values(), key=lambda h: -h.score)[:k]

    def search_chunks(
        self,
        query: str,
        k: int = 4,
        *,
        doc_ids: Sequence[str] | None = None,
        embedding: list[float] | None = None,
        chunk_counts: dict[str, int] | None = None,
    ) -> list[SearchHit]:
        """Top-``k`` source chunks, optionally restricted to ``doc_ids`` (``chunk_counts``:
        how many chunks each has, as its summary's ``cos_chunks`` says, to read them by id)."""
        if k <= 0:
            return []
        emb = embedding or self.embedder.embed_query(query)
        scope: dict | None = None
        if doc_ids:
            scope = _doc_filter(list(dict.fromkeys(doc_ids)))
            # a few documents' chunks: read them and rank them here, exactly (Chroma's
            # filtered search took 1.7 ms for what this does in 0.6 at 2,000 documents);
            # by their ids when the caller knows how many there are (a summary vector
            # records it: a metadata filter took 15.8 ms at 100,000 chunks, the ids 1.5)
            if chunk_counts and all(d in chunk_counts for d in doc_ids):
                ids = [f"{d}::chunk::{i}" for d in doc_ids for i in range(chunk_counts[d])]
                hits = self._rank_scoped(self.chunks, emb, k, ids=ids)
            else:
                hits = self._rank_scoped(self.chunks, emb, k, where=scope)
        else:
            hits = self._query(self.chunks, emb, k, None, "chunk")
        if len(hits) < k:  # chunks written next to the summaries by a LlamaIndex pipeline
            kind = {"cos_kind": "chunk"}
            where = {"$and": [kind, scope]} if scope else kind
            hits += self._query(self.summaries, emb, k, where, "chunk")
            hits = sorted(hits, key=lambda h: -h.score)[:k]
        return hits

    def rank_stored_text(
        self,
        query: str,
        k: int = 4,
        *,
        doc_ids: Sequence[str],
        embedding: list[float] | None = None,
        max_chunks: int = 256,
    ) -> list[SearchHit]:
        """Top-``k`` chunks of the *stored* full text of ``doc_ids``, chunked and embedded
        now (at most ``max_chunks`` per document): the miss path of an index that holds no
        chunk vectors, e.g. one written by a LlamaIndex pipeline that emits only summary
        nodes. Items are ``kind="chunk"`` with ``cos_on_the_fly=True`` in their metadata."""
        if k <= 0:
            return []
        pieces: list[tuple[str, int, str, Any]] = []
        for doc_id in dict.fromkeys(doc_ids):
            doc = self.store.get_document(doc_id)
            if doc is None or not doc.text.strip():
                continue
            chunks = chunk_text(doc.text, words=self.chunk_words, overlap=self.chunk_words // 5)
            pieces += [(doc_id, i, c, doc) for i, c in enumerate(chunks[:max_chunks])]
        if not pieces:
            return []
        emb = embedding or self.embedder.embed_query(query)
        vectors = self.embedder.embed_documents([p[2] for p in pieces])
        qn = sum(x * x for x in emb) ** 0.5 or 1.0
        out = []
        for (doc_id, i, text, doc), vec in zip(pieces, vectors, strict=True):
            vn = sum(x * x for x in vec) ** 0.5 or 1.0
            score = sum(a * b for a, b in zip(emb, vec, strict=True)) / (qn * vn)
            meta = flatten_metadata(
                {"doc_id": doc_id, "source": doc.source, "title": doc.title, "chunk": i}
            )
            meta.update(cos_kind="chunk", cos_on_the_fly=True)
            out.append(SearchHit(f"{doc_id}::text::{i}", doc_id, text, float(score), meta, "chunk"))
        return sorted(out, key=lambda h: -h.score)[:k]

    def _query(self, collection, emb, k: int, where: dict | None, kind: str) -> list[SearchHit]:
        # no count() first: Chroma answers with fewer (or none) when it has fewer, and a
        # count cost 9.7 ms at 100,000 vectors, twice what the search itself took
        res = read_racing_writes(
            collection.query,
            query_embeddings=[emb],
            n_results=k,
            where=where,
            include=["documents", "metadatas", "distances"],
        )
        return self._hits(res, kind)
