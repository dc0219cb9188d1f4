"""The docstrings' examples are code that runs: every module's doctests pass (an example
marked ``# doctest: +SKIP`` needs a model or an index and is shown, not run), and every
public class of the three packages shows a short example (the project's style)."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil

import pytest

PACKAGES = ("cos_integrations", "llamaindex_ext", "langchain_ext")


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        root = importlib.import_module(package)
        names.append(package)
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if not info.name.endswith("__main__"):  # running it would start the CLI
                names.append(info.name)
    return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in doctest.DocTestFinder(exclude_empty=True).find(module, name):
        runner.run(test, out=lambda text: print(text, end=""))
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} doctest example(s) failed in {name}"


def test_every_public_class_shows_an_example():
    missing = []
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if not inspect.isclass(obj):
                continue
            doc = inspect.getdoc(obj) or ""
            if ">>>" not in doc and ".. code-block::" not in doc:
                missing.append(f"{package}.{name}")
    assert not missing, f"public classes without an example in their docstring: {missing}"
