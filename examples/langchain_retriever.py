"""LangChain end to end on the embedded default model: add documents, retrieve, the QA
chain over the retriever (a hit answered with no second model call, a repeat served its
verified answer with none), and a plain LCEL chain beside it.

Run: ``python examples/langchain_retriever.py`` (after ``make install-default``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

from cos_integrations import CoSConfig, load_paths, open_model
from langchain_ext import (
    CoSChatModel,
    CoSFallbackRetriever,
    CoSLocalEmbeddings,
    create_cos_qa_chain,
)

HERE = Path(__file__).parent


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(d.page_content for d in docs)


def main(index_dir: Path) -> None:
    shutil.rmtree(index_dir, ignore_errors=True)
    loaded, _ = load_paths([HERE / "docs"])
    docs = [
        Document(page_content=d.text, id=d.doc_id, metadata={"source": d.source, "title": d.title})
        for d in loaded
    ]
    with open_model(echo=print) as core_model:
        chat = CoSChatModel(model=core_model, max_tokens=96)
        retriever = CoSFallbackRetriever.from_persist_dir(
            index_dir,
            llm=chat,
            embeddings=CoSLocalEmbeddings(),
            k=2,
            config=CoSConfig.shipped(max_summary_words=60),  # what `cos ingest` ships
        )  # the shipped hit rule: the model judge, as the retriever has a model
        print("indexed:", retriever.add_documents(docs))
        for q in ("When is the rent due?", "How many kilometres make a train journey mandatory?"):
            found = retriever.invoke(q)
            kind = "HIT (summaries)" if found and found[0].metadata["cos_hit"] else "MISS (chunks)"
            print(f"\n{q!r}: {kind}; sources {[d.metadata.get('source') for d in found]}")
        prompt = ChatPromptTemplate.from_messages(
            [
                ("system", "Answer in a few words using only this context:\n{context}"),
                ("user", "{question}"),
            ]
        )
        chain = (
            {"context": retriever | format_docs, "question": RunnablePassthrough()}
            | prompt
            | chat
            | StrOutputParser()
        )
        question = "How much is the daily meal allowance?"
        print(f"\nLCEL chain (its own answer call every time): {chain.invoke(question)!r}")
        qa = create_cos_qa_chain(retriever, chat)
        for _ in range(2):
            out = qa.invoke(question)
            how = out["served"] or ("hit" if out["hit"] else "miss")
            print(f"QA chain: {question!r} -> {out['answer']!r} ({how})")
        print(
            f"hits {retriever.hits}, misses {retriever.misses}; pending refine jobs:",
            [(j.doc_id, j.query) for j in retriever.index.store.jobs("pending")],
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("demo-index-langchain"))
