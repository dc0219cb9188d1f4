"""A real documentation site, end to end: the Python tutorial's HTML pages (Debian's
``python3-doc``, installed offline) split into sections, summarised in the shipped tiered
mode on the embedded model, asked real questions, answered with citations, exported as
``llms.txt``.

1. ingest the tutorial's pages as sections (navigation, sidebars and footers removed;
   each section keeps its heading path and anchor);
2. ask a handful of questions: each answer names the section it came from
   (``datastructures.html#list-comprehensions``), hit or miss, and the summary version;
3. write ``llms.txt`` (links grouped by page) and ``llms-full.txt``;
4. ingest again: nothing changed, so no model call.

Run: ``python examples/docs_site.py [INDEX_DIR] [--pages datastructures,controlflow]``
(all 17 pages by default: about 110 sections, one model call each on the 1.5B model).
Needs ``apt-get install python3-doc``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from cos_integrations import (
    ChainOfSummaries,
    CoSConfig,
    CoSIndex,
    FallbackRetriever,
    LocalEmbedder,
    answer_from,
    load_paths,
    open_model,
)
from cos_integrations.serving.export import collect_entries, render_llms_full, render_llms_txt

TUTORIAL = Path("/usr/share/doc/python3-doc/html/tutorial")
QUESTIONS = [
    "How do you use a list as a queue efficiently?",
    "What does the else clause of a for loop do?",
    "What keyword handles an exception?",
    "How do you create a virtual environment?",
    "What does the del statement remove?",
]


async def main(index_dir: Path, pages: list[str] | None) -> None:
    if not TUTORIAL.is_dir():
        raise SystemExit(f"{TUTORIAL} not found: apt-get install python3-doc")
    # the whole folder (ids tutorial/PAGE.html#anchor), or the pages named (PAGE.html#anchor);
    # either way a citation names the installed page and its section
    chosen = [TUTORIAL / f"{name}.html" for name in pages] if pages else [TUTORIAL]
    docs, problems = load_paths(chosen, sections=True)
    for p in problems:
        print(f"skipped {p.path}: {p.reason}")
    n_pages = len({d.metadata["page"] for d in docs})
    print(f"{len(docs)} sections on {n_pages} pages ({len(docs) / n_pages:.1f} a page)")
    index = CoSIndex(index_dir, embedder=LocalEmbedder(), config=CoSConfig())
    with open_model(None, n_ctx=index.config.context_tokens, echo=print) as llm:
        engine = ChainOfSummaries(llm, index.config)
        t0 = time.monotonic()
        report = await index.aingest(docs, engine, concurrency=1)
        took = time.monotonic() - t0
        print(
            f"ingested in {took:.0f}s ({took / max(1, len(report.summarized)):.0f}s a new "
            f"section, {report.usage.calls} calls); failed: {len(report.failed)}"
        )
        retriever = FallbackRetriever(index, llm=llm, k=2)  # the shipped rule: the model judges
        for q in QUESTIONS:
            res = await retriever.aretrieve(q)
            answer = res.answer
            if answer is None and res.items:
                answer, _ = await answer_from(llm, q, res.items)
            print(f"\n{'HIT ' if res.hit else 'MISS'} {q}\n  answer: {answer}")
            for c in res.citations[:2]:
                print(f"  source: {c}")
        again = await index.aingest(docs, engine)
        print(f"\nre-crawl: {len(again.unchanged)} unchanged, {again.usage.calls} model calls")
    entries = collect_entries(index)
    (index_dir / "llms.txt").write_text(
        render_llms_txt("Python tutorial", entries, description="The Python tutorial")
    )
    (index_dir / "llms-full.txt").write_text(render_llms_full("Python tutorial", entries))
    print(f"wrote {index_dir / 'llms.txt'} ({len(entries)} sections)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", nargs="?", default="docs-site-index")
    parser.add_argument("--pages", help="comma-separated page names (default: all 17)")
    args = parser.parse_args()
    chosen = [p.strip() for p in args.pages.split(",")] if args.pages else None
    asyncio.run(main(Path(args.index), chosen))
