"""_run: see ARCHITECTURE.md."""
