"""Context management: what keeps a long run inside the model's window.

- `budget`: the window, token estimates, and the `trigger=` / `keep=` sizes;
- `offload`: large tool results written to files (`ToolResultOffload`, which both
  `SummarizationMiddleware` and `FilesystemMiddleware` hold), and where artifacts go;
- `history`: the summarization event in state, and the conversation the model is shown;
- `media`: inline media of summarized messages saved as files;
- `compact_tool`: the `compact_conversation` tool;
- `summarization`: summarizing the history near the window (and on a provider's overflow
  error), archiving it, and cutting old `write_file` inputs;
- `eviction`: large user messages saved to a file, a preview left in their place;
- `blob_offload`: binary content blocks saved to files.

Layer: capabilities. Imports the core and `fathom.backends`. `fathom.agent` composes
these; no other middleware builds its own summarizer.
"""
