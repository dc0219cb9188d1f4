"""The embedded model: what runs on this machine with no API key.

``server`` (:class:`~cos_integrations.embedded.server.LocalModelServer`: llama.cpp on
127.0.0.1 over a packaged GGUF model), ``embeddings`` (the local e5 embedder and a lexical
one), ``runtime`` (:func:`~cos_integrations.embedded.runtime.open_model`: choose the model
and embedder the same way everywhere), ``_server_child`` (the server's process).
"""
