"""_fetch: see ARCHITECTURE.md."""
