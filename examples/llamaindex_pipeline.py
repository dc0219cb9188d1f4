"""LlamaIndex end to end on the embedded default model: an IngestionPipeline with the CoS
transform into Chroma, then the fallback retriever, the postprocessor, and the query engine
over it (a hit answered with no second model call, a repeat served with none).

Run: ``python examples/llamaindex_pipeline.py`` (after ``make install-default``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import chromadb
from llama_index.core import Document
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.vector_stores.chroma import ChromaVectorStore

from cos_integrations import CoSConfig, load_paths, open_model
from llamaindex_ext import (
    CoSExpandToSourcePostprocessor,
    CoSFallbackRetriever,
    CoSLocalEmbedding,
    CoSQueryEngine,
    CoSSummaryTransform,
)

HERE = Path(__file__).parent


def main(index_dir: Path) -> None:
    shutil.rmtree(index_dir, ignore_errors=True)
    loaded, _ = load_paths([HERE / "docs"])
    docs = [
        Document(text=d.text, id_=d.doc_id, metadata={"file_path": d.source, "title": d.title})
        for d in loaded
    ]
    client = chromadb.PersistentClient(path=str(index_dir))
    collection = client.get_or_create_collection(
        "cos_summaries", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    embed_model = CoSLocalEmbedding()
    with open_model(echo=print) as llm:
        transform = CoSSummaryTransform(
            llm=llm,
            config=CoSConfig.shipped(max_summary_words=60),  # what `cos ingest` ships
            emit="both",
            store_path=index_dir / "cos.sqlite",
        )
        pipeline = IngestionPipeline(
            transformations=[transform, embed_model],
            vector_store=ChromaVectorStore(chroma_collection=collection),
            docstore=SimpleDocumentStore(),
            docstore_strategy=DocstoreStrategy.UPSERTS,
        )
        nodes = pipeline.run(documents=docs, show_progress=True)
        for n in nodes:
            if n.metadata["cos_kind"] == "summary":
                print(
                    f"{n.metadata['doc_id']}: {n.metadata['summary_tokens']} summary tokens "
                    f"from {n.metadata['source_tokens']} source tokens"
                )
        retriever = CoSFallbackRetriever.from_persist_dir(
            index_dir,
            llm=llm,
            embed_model=embed_model,
            similarity_top_k=2,
        )  # the shipped hit rule: the model judge, as the retriever has a model
        for q in ("When is the rent due?", "Where must bicycles be stored?"):
            found = retriever.retrieve(q)
            state = "HIT" if found and found[0].node.metadata["cos_hit"] else "MISS"
            print(f"\n[{state}] {q!r}")
            for n in found:
                print(
                    f"   {n.node.metadata['cos_kind']} {n.node.metadata['doc_id']} "
                    f"{n.score:.3f}: {n.node.get_content()[:100]!r}"
                )
        expanded = CoSExpandToSourcePostprocessor(index=retriever.index).postprocess_nodes(
            retriever.retrieve("When is the rent due?")
        )
        print(
            f"\nexpanded to {len(expanded)} source chunks; hits {retriever.hits}, "
            f"misses {retriever.misses}"
        )
        engine = CoSQueryEngine.from_defaults(retriever, llm=llm)  # or any LlamaIndex LLM
        for _ in range(2):
            response = engine.query("How much is the daily meal allowance?")
            print(f"query engine: {response} {response.metadata}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("demo-index-llamaindex"))
