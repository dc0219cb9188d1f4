"""The documentation site's hook (``mkdocs_hooks.py``): the docstrings' Sphinx roles
become cross-references, not literal ``:meth:`` text."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mkdocs_hooks import on_page_content  # noqa: E402


def test_roles_become_optional_references_with_the_name_a_reader_expects():
    html = (
        "<p>See :class:<code>~cos_integrations.serving.index.CoSIndex</code>, "
        ":meth:<code>CoSConfig.config_hash</code> and "
        ":meth:<code>Refiner.adeepen &lt;cos_integrations.serving.refine.Refiner.adeepen&gt;</code>"
        ", not :unknown:<code>x</code>.</p>"
    )
    out = on_page_content(html)
    assert ":class:" not in out and ":meth:" not in out
    assert (
        '<autoref optional identifier="cos_integrations.serving.index.CoSIndex">'
        "<code>CoSIndex</code></autoref>" in out
    )
    assert '<autoref optional identifier="CoSConfig.config_hash">' in out
    assert (
        '<autoref optional identifier="cos_integrations.serving.refine.Refiner.adeepen">'
        "<code>Refiner.adeepen</code></autoref>" in out
    )
    assert ":unknown:<code>x</code>" in out  # not a Python role: left alone
