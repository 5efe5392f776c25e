"""Context management: what keeps a long run inside the model's window.

- `summarization`: summarizing the history near the window (and on a provider's overflow
  error), archiving it, trimming old `write_file` inputs, offloading large tool results,
  and the `compact_conversation` tool;
- `eviction`: large user messages saved to a file, a preview left in their place;
- `blob_offload`: binary content blocks saved to files.

Layer: capabilities. Imports the core and `fathom.backends`. `fathom.agent` composes
these; no other middleware builds its own summarizer.
"""
