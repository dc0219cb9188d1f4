"""Several refine worker processes on one store: no job done twice, no lost version; on
SQLite with Chroma on disk, and on PostgreSQL with a Chroma server (`chroma run`)."""

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from collections import Counter

from fakes import ScriptedFakeModel, make_document
from openai_server import FakeOpenAIServer

from cos_integrations import ChainOfSummaries, CoSConfig
from cos_integrations.loaders import SourceDocument

WORKER = textwrap.dedent(
    """
    import json, sys
    from cos_integrations import ChainOfSummaries, CoSConfig, OpenAIChatModel
    from cos_integrations.serving.index import CoSIndex
    from cos_integrations.serving.refine import Refiner
    index = CoSIndex(sys.argv[1], create=False)
    llm = OpenAIChatModel("fake", base_url=sys.argv[2], api_key="sk-test")
    refiner = Refiner(index, ChainOfSummaries(llm, CoSConfig.fast(iterations=0)),
                      worker_id=sys.argv[3], min_asks=1)
    for o in refiner.run_once():
        print(json.dumps({"job": o.job_id, "doc": o.doc_id, "status": o.status,
                          "version": o.version, "worker": sys.argv[3]}), flush=True)
    """
)


def test_four_workers_on_overlapping_jobs(stack):
    index, env = stack
    engine = ChainOfSummaries(ScriptedFakeModel(thesis_facts=1), CoSConfig.fast(iterations=0))
    topics = ["lease", "garden", "parking"]
    docs = [SourceDocument(doc_id=t, text=make_document(14, topic=t)) for t in topics]
    asyncio.run(index.aingest(docs, engine))
    store = index.store
    job_ids = set()
    for t in topics:
        for i in range(8, 13):  # facts beyond the generated bank
            job_ids.add(store.enqueue(t, f"What is the {t} item {i}?"))
            job_ids.add(store.enqueue(t, f"what is the {t} item {i}"))  # duplicate: same job
    assert len(job_ids) == 15
    with FakeOpenAIServer(ScriptedFakeModel(thesis_facts=1)) as srv:
        t0 = time.perf_counter()
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", WORKER, str(index.path), srv.base_url, f"w{i}"],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            for i in range(4)
        ]
        outs = [p.communicate(timeout=300)[0] for p in procs]
        print(
            f"\n{index.store.backend.name}: 4 workers, 15 jobs in {time.perf_counter() - t0:.1f} s"
        )
        assert all(p.returncode == 0 for p in procs)
    outcomes = [json.loads(line) for out in outs for line in out.splitlines() if line.strip()]
    finals = [o for o in outcomes if o["status"] in ("published", "rejected", "not_in_source")]
    # every job ended exactly once, by one worker
    assert Counter(o["job"] for o in finals) == Counter({j: 1 for j in job_ids})
    assert {j.status for j in store.jobs()} <= {"published", "rejected", "not_in_source"}
    assert all(o["status"] != "dead" for o in outcomes)
    for t in topics:
        versions = [v.version for v in store.versions(t)]
        assert versions == list(range(1, len(versions) + 1))  # strictly increasing, no gap
        published = [o for o in finals if o["doc"] == t and o["status"] == "published"]
        assert len(versions) == 1 + len(published)  # no lost and no phantom version
        assert store.current_summary(t).version == versions[-1]
        vec = index.summaries.get(where={"doc_id": t}, include=["metadatas"])
        assert len(vec["ids"]) == 1 and vec["metadatas"][0]["cos_version"] == versions[-1]
    # the work was shared
    assert len({o["worker"] for o in finals}) > 1


def test_cli_workers_use_the_store_named_on_the_command_line(postgres_url, tmp_path):
    """`cos refine --workers 2 --store-url postgresql://...` on a server with password
    authentication: every worker opens that store (the password reaches them through the
    environment, not their command lines), every job ends there, and no SQLite store
    appears beside the index."""
    import os

    from cos_integrations.embedded.embeddings import HashingEmbedder
    from cos_integrations.serving.index import CoSIndex

    path = tmp_path / "index"
    index = CoSIndex(
        path, embedder=HashingEmbedder(256), config=CoSConfig.fast(), store_url=postgres_url
    )
    engine = ChainOfSummaries(ScriptedFakeModel(thesis_facts=1), CoSConfig.fast(iterations=0))
    asyncio.run(index.aingest([SourceDocument(doc_id="lease", text=make_document(14))], engine))
    jobs = {index.store.enqueue("lease", f"What is the lease item {i}?") for i in range(8, 12)}
    index.store.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "COS_STORE"))}
    with FakeOpenAIServer(ScriptedFakeModel(thesis_facts=1)) as srv:
        args = [sys.executable, "-m", "cos_integrations.cli", "refine", "--index", str(path)]
        args += ["--min-asks", "1"]  # each job's question missed once
        args += ["--store-url", postgres_url, "--workers", "2"]
        args += ["--base-url", srv.base_url, "--model", "fake"]
        proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    # (a worker may find no pending job: the other can take all four before it starts; a
    # worker that opened any other store would fail without the password or leave a SQLite
    # file beside the index, both checked)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reopened = CoSIndex(path, store_url=postgres_url)
    try:
        finals = {j.id: j.status for j in reopened.store.jobs()}
        assert set(finals) == jobs
        assert set(finals.values()) <= {"published", "rejected", "not_in_source"}
    finally:
        reopened.store.close()
    assert not (path / "cos.sqlite").exists()  # nothing went to a stray local store
